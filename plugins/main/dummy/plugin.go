// Package dummy is the dummy plugin: a dummy link in the container holding
// the IPAM addresses (service addresses that need no wire).
//
// It runs on the frame in pkg/attach and the link helpers in pkg/link.
// ADD, in order (each step pushes its undo; a failure or panic runs them
// in reverse, IPAM release included):
//
//	link       the dummy link, made in the container under a temporary
//	           name, tagged with the attachment's alias, renamed to
//	           CNI_IFNAME, then up
//	ipam       the link up (the dhcp daemon leases on it): delegate ADD
//	           to the IPAM plugin
//	configure  arp_notify/ndisc_notify, addresses and routes
//
// DEL deletes CNI_IFNAME in the container when it is a dummy of this
// attachment (or untagged), then releases IPAM; with a config that no
// longer has ipam (the one thing dummy validates), it deletes the link and
// releases nothing: the address stays reserved until a DEL or GC that names
// the IPAM plugin (the runtime's cached config does). CHECK compares type,
// MAC, addresses and routes with prevResult. GC and STATUS are IPAM's.
package dummy

import "github.com/cniforge/plugins/pkg/link"

// AddSteps lists the steps of ADD in the order they run, as passed to
// attach.Hooks.AfterStep: link.Add's (link.StepLink, StepIPAM, StepConfigure).
var AddSteps = link.AddSteps

// Frame is the dummy plugin on pkg/link's frame: Frame.New(hooks) is its
// descriptor running with hooks (tests inject failures through them).
var Frame = link.Plugin[netConf, *netConf]{Kind: "dummy", Parse: parse, Add: add, Check: check,
	Summary: "a dummy link in the container with the IPAM addresses"}

// Plugin is the dummy plugin's descriptor.
var Plugin = Frame.Descriptor()
