// Package ipvlan is the ipvlan plugin: an ipvlan link on a master
// interface, in the container. Unlike macvlan it shares the master's MAC;
// the master tells its links apart by IP address.
//
// It runs on the frame in pkg/attach and the link helpers in pkg/link.
// Before any change, ADD parses prevResult (chained use), resolves the
// master (the config's "master"; chained, the single interface of
// prevResult; else the default route's interface; with linkInContainer, in
// the container) and refuses an mtu above the master's. Then, in order
// (each step pushes its undo; a failure or panic runs them in reverse,
// IPAM release included):
//
//	link       the ipvlan link, made under a temporary name in the
//	           master's namespace, moved into the container, renamed to
//	           CNI_IFNAME and tagged with the attachment's alias, then up
//	ipam       the link up (the dhcp daemon leases on it): delegate ADD
//	           to the IPAM plugin; without "ipam", chained,
//	           prevResult's addresses; neither: layer 2 only
//	configure  arp_notify/ndisc_notify, addresses and routes,
//	           gratuitous ARP
//
// DEL deletes CNI_IFNAME in the container when it is an ipvlan of this
// attachment (or untagged), then releases IPAM. CHECK compares type, mode,
// master (when "master" is set), MTU, addresses and routes with
// prevResult. GC and STATUS are IPAM's.
package ipvlan

import "github.com/cniforge/plugins/pkg/link"

// AddSteps lists the steps of ADD in the order they run, as passed to
// attach.Hooks.AfterStep: link.Add's (link.StepLink, StepIPAM, StepConfigure).
var AddSteps = link.AddSteps

// Frame is the ipvlan plugin on pkg/link's frame: Frame.New(hooks) is its
// descriptor running with hooks (tests inject failures through them).
var Frame = link.Plugin[config, *config]{Kind: "ipvlan", Parse: parse, Add: add, Check: check,
	Summary: "an ipvlan link on a master interface"}

// Plugin is the ipvlan plugin's descriptor.
var Plugin = Frame.Descriptor()
