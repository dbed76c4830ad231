// Package macvlan is the macvlan plugin: a macvlan link on a master
// interface, in the container, with its own MAC on the master's wire.
//
// It runs on the frame in pkg/attach and the link helpers in pkg/link.
// Before any change, ADD resolves the master (the default route's
// interface when "master" is not set; with linkInContainer, in the
// container) and refuses an mtu above the master's. Then, in order (each
// step pushes its undo; a failure or panic runs them in reverse, IPAM
// release included):
//
//	link       the macvlan link, made under a temporary name in the
//	           master's namespace, moved into the container, renamed to
//	           CNI_IFNAME and tagged with the attachment's alias, then up
//	ipam       the link up (the dhcp daemon leases on it): delegate ADD
//	           to the IPAM plugin (skipped: layer 2 only)
//	configure  arp_notify/ndisc_notify, addresses and routes,
//	           gratuitous ARP
//
// DEL deletes CNI_IFNAME in the container when it is a macvlan of this
// attachment (or untagged), then releases IPAM; a namespace that is gone
// took the link with it. CHECK compares type, mode, master, MAC, MTU,
// addresses and routes with prevResult. GC and STATUS are IPAM's.
package macvlan

import "github.com/cniforge/plugins/pkg/link"

// AddSteps lists the steps of ADD in the order they run, as passed to
// attach.Hooks.AfterStep: link.Add's (link.StepLink, StepIPAM, StepConfigure).
var AddSteps = link.AddSteps

// Frame is the macvlan plugin on pkg/link's frame: Frame.New(hooks) is its
// descriptor running with hooks (tests inject failures through them).
var Frame = link.Plugin[config, *config]{Kind: "macvlan", Parse: parse, Add: add, Check: check,
	Summary: "a macvlan link on a master interface"}

// Plugin is the macvlan plugin's descriptor.
var Plugin = Frame.Descriptor()
