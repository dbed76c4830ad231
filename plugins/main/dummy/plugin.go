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
// longer has ipam, it deletes the link and releases nothing. CHECK compares type, MAC,
// addresses and routes with prevResult. GC and STATUS are IPAM's.
package dummy

import (
	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/link"
	"github.com/cniforge/plugins/pkg/plugin"
)

// The steps of ADD, in order, as passed to attach.Hooks.AfterStep.
const (
	StepLink      = link.StepLink      // the link exists in the container as CNI_IFNAME, up
	StepIPAM      = link.StepIPAM      // IPAM reserved the addresses
	StepConfigure = link.StepConfigure // addresses, routes, announcement
)

// AddSteps lists the steps of ADD in the order they run (link.Add's).
var AddSteps = link.AddSteps

var frame = attach.Plugin[*netConf]{
	Name:    "dummy",
	Summary: "a dummy link in the container with the IPAM addresses",
	Parse:   parse,
	Add:     add,
	// DEL finds the link by CNI_IFNAME and its alias: a config edited since
	// ADD to drop ipam (the one thing dummy validates) still removes the
	// link; the address then stays reserved until a DEL or GC that names
	// the IPAM plugin (the runtime's cached config does).
	Lenient: attach.DecodeOnly[netConf],
	Del:     del,
	Check:   check,
	// GC and STATUS: the frame's (IPAM). The link dies with its namespace.
}

// New returns the dummy plugin's descriptor running with hooks.
func New(hooks attach.Hooks) plugin.Plugin { return frame.Descriptor(hooks) }

// Plugin is the dummy plugin's descriptor.
var Plugin = New(attach.Hooks{})
