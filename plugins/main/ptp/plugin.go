// Package ptp is the ptp plugin: a veth pair per container, routed (not
// bridged) through the host. The host end holds the gateway address as a
// /32 (/128) with a host route to each container address; in the container
// the gateway is reached by a link-scope host route and the rest of the
// subnet through it, so every packet, even to a neighbour in the same
// subnet, goes through the host.
//
// It runs on the frame in pkg/attach. ADD, in order (each step pushes its
// undo; a failure or panic runs them in reverse, IPAM release included):
//
//	ipam        delegate ADD to the IPAM plugin; every address needs a gateway
//	veth        veth pair: host end named from the attachment, both ends aliased
//	container   container end: addresses and routes
//	host        host end: gateway addresses and host routes; both ends oper-up
//	forwarding  IP forwarding for the families in use
//	masquerade  source NAT rules (when ipMasq)
//	announce    gratuitous ARP
package ptp

import (
	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/attach/masquerade"
	"github.com/cniforge/plugins/pkg/ipam"
	"github.com/cniforge/plugins/pkg/plugin"
)

// The steps of ADD, in order, as passed to attach.Hooks.AfterStep.
const (
	StepIPAM       = "ipam"       // IPAM reserved the addresses
	StepVeth       = "veth"       // the veth pair exists
	StepContainer  = "container"  // container end: addresses and routes
	StepHost       = "host"       // host end: gateway addresses and host routes
	StepForwarding = "forwarding" // forwarding enabled for the families in use
	StepMasquerade = "masquerade" // masquerade rules installed (when ipMasq)
	StepAnnounce   = "announce"   // gratuitous ARP sent
)

// AddSteps lists the steps of ADD in the order they run.
var AddSteps = []string{StepIPAM, StepVeth, StepContainer, StepHost, StepForwarding, StepMasquerade, StepAnnounce}

var frame = attach.Plugin[*netConf]{
	Name:    "ptp",
	Summary: "a veth pair per container, routed through the host",
	IPAM:    ipam.Frame{},
	Parse:   parse,
	Add:     add,
	// DEL finds the pair by CNI_IFNAME and its alias, IPAM by ipam, and
	// masquerade rules by owner on both backends: a config edited since
	// ADD that no longer validates does not stop it.
	Lenient: attach.DecodeOnly[netConf],
	Del:     del,
	Check:   check,
	// GC and STATUS: the frame's (IPAM, masquerade). Veths need no
	// collection: they die with their namespace.
	Masq: masquerade.Frame{},
}

// New returns the ptp plugin's descriptor running with hooks.
func New(hooks attach.Hooks) plugin.Plugin { return frame.Descriptor(hooks) }

// Plugin is the ptp plugin's descriptor.
var Plugin = New(attach.Hooks{})
