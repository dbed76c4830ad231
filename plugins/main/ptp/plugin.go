// Package ptp is the ptp plugin: a veth pair per container, routed (not
// bridged) through the host. The host end holds the gateway address as a
// /32 (/128) with a host route to each container address; in the container
// the gateway is reached by a link-scope host route and the rest of the
// subnet through it, so every packet, even to a neighbour in the same
// subnet, goes through the host.
package ptp

import (
	"github.com/containernetworking/cni/pkg/skel"

	"github.com/cniforge/plugins/pkg/plugin"
)

// Options changes how the plugin runs; the zero value is production.
type Options struct {
	// AfterStep, when set, runs after each step of ADD named in AddSteps.
	// An error it returns fails ADD at that point as a kernel error would,
	// so tests can check that everything made so far is undone.
	AfterStep func(step string) error
}

// The steps of ADD, in order, as passed to Options.AfterStep.
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

// New returns the ptp plugin's descriptor running with opts.
func New(opts Options) plugin.Plugin {
	p := &ptp{opts: opts}
	return plugin.Plugin{
		Name:     "ptp",
		Summary:  "a veth pair per container, routed through the host",
		Versions: plugin.AllVersions,
		Funcs: skel.CNIFuncs{
			Add:    p.cmdAdd,
			Del:    p.cmdDel,
			Check:  p.cmdCheck,
			GC:     p.cmdGC,
			Status: p.cmdStatus,
		},
	}
}

// Plugin is the ptp plugin's descriptor.
var Plugin = New(Options{})

type ptp struct {
	opts Options
}

// after runs the test hook, if any, after step.
func (p *ptp) after(step string) error {
	if p.opts.AfterStep == nil {
		return nil
	}
	return p.opts.AfterStep(step)
}
