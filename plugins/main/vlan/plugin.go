// Package vlan is the vlan plugin: an 802.1Q vlan link on a master
// interface, in the container, so its traffic leaves the master tagged
// with vlanId.
//
// It runs on the frame in pkg/attach and the link helpers in pkg/link.
// Before any change, ADD resolves the master (with linkInContainer, in
// the container) and refuses an mtu above the master's. Then, in order
// (each step pushes its undo; a failure or panic runs them in reverse,
// IPAM release included):
//
//	link       the vlan link, made under a temporary name in the master's
//	           namespace, moved into the container, renamed to CNI_IFNAME
//	           and tagged with the attachment's alias. A second vlan of the
//	           same ID on the same master is refused, naming both. It comes up.
//	ipam       the link up (the dhcp daemon leases on it): delegate ADD
//	           to the IPAM plugin (skipped: layer 2 only)
//	configure  arp_notify/ndisc_notify, addresses and routes,
//	           gratuitous ARP
//
// DEL deletes CNI_IFNAME in the container when it is a vlan of this
// attachment (or untagged), then releases IPAM. CHECK compares type, VLAN
// ID, master, MTU, MAC, addresses and routes with prevResult. GC and
// STATUS are IPAM's.
package vlan

import "github.com/cniforge/plugins/pkg/link"

// AddSteps lists the steps of ADD in the order they run, as passed to
// attach.Hooks.AfterStep: link.Add's (link.StepLink, StepIPAM, StepConfigure).
var AddSteps = link.AddSteps

// Frame is the vlan plugin on pkg/link's frame: Frame.New(hooks) is its
// descriptor running with hooks (tests inject failures through them).
var Frame = link.Plugin[netConf, *netConf]{Kind: "vlan", Parse: parse, Add: add, Check: check,
	Summary: "an 802.1Q vlan link on a master interface"}

// Plugin is the vlan plugin's descriptor.
var Plugin = Frame.Descriptor()
