// Package bandwidth is the bandwidth plugin, a chained plugin: it limits
// the rate of the traffic into the container (tbf on the host end of its
// veth) and out of it (the host end's ingress redirected to an ifb device
// that carries a tbf), everything over netlink.
//
// It runs on the frame in pkg/attach in chained mode (ADD needs
// prevResult, code 7 without it). ADD, in order (each step pushes its
// undo; a failure or panic runs them in reverse):
//
//	(resolve)  the limits (runtimeConfig.bandwidth over the top-level
//	           keys; none: prevResult passes through untouched); the host
//	           end: the peer of CNI_IFNAME, a veth, listed in prevResult
//	           as a host interface; tbf parameters (a burst tbf cannot
//	           hold at its rate is clamped to the largest it can, and
//	           logged)
//	ingress    tbf as the root qdisc of the host end (ingressRate); a
//	           root qdisc that is not bandwidth's (a tbf 1:) is refused,
//	           unchanged
//	ifb        ifb "bwp<hash>" up, MTU of the host end (egressRate)
//	redirect   u32 filter with a mirred redirect to the ifb on the host
//	           end's ingress hook (its clsact or ingress qdisc reused, a
//	           clsact made when there is none)
//	egress     tbf as the root qdisc of the ifb
//
// Each step keeps what is there and right and re-makes only what is
// missing or different, so an ADD over a live attachment (what `cniforge
// check --repair` runs) repairs it in place, never unshaped for a moment;
// its undo puts back what it changed and deletes only what it made.
//
// The result is prevResult plus the ifb, as upstream reports it. DEL
// deletes what ADD put on the host end (found through prevResult or as the
// peer of CNI_IFNAME), then the ifb by name (no netns, no prevResult and
// no limits needed: what `cniforge gc` sends for an orphan). It deletes
// only bandwidth's: a root tbf 1:, u32 redirects to a "bwp" ifb or to a
// link that is gone (with their classifier when it is left empty), the
// hook's qdisc when no filter is left on either hook. CHECK compares every
// qdisc, the ifb (up) and the redirect with the config. GC deletes the ifbs this suite made
// for the network whose container is not listed. STATUS has nothing to
// report.
//
// Files by concern: config.go parses and validates; add.go resolves the
// plan and runs the steps; tbf.go computes tbf's parameters (and clamps a
// burst) and takes the root slot; ifb.go names and makes the ifb;
// redirect.go holds the ingress hook, the redirect and which redirects are
// bandwidth's; del.go is DEL and GC with their ownership rules; check.go
// is CHECK.
package bandwidth

import (
	"github.com/containernetworking/cni/pkg/version"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/plugin"
)

// The steps of ADD, in order, as passed to attach.Hooks.AfterStep.
const (
	StepIngress  = "ingress"  // tbf on the host end
	StepIfb      = "ifb"      // the ifb exists
	StepRedirect = "redirect" // the host end's ingress goes to the ifb
	StepEgress   = "egress"   // tbf on the ifb
)

// AddSteps lists the steps of ADD in the order they run.
var AddSteps = []string{StepIngress, StepIfb, StepRedirect, StepEgress}

// versions are upstream's: 0.3.0 and up (a chained plugin needs
// prevResult's interfaces).
var versions = version.PluginSupports("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")

// New returns the bandwidth plugin's descriptor running with hooks.
func New(hooks attach.Hooks) plugin.Plugin {
	return attach.Plugin[*netConf]{
		Name:     "bandwidth",
		Summary:  "rate limits on a container's veth, in and out, with tbf and an ifb",
		Versions: versions,
		Chained:  true,
		Parse:    parse,
		Add:      add,
		// DEL finds the ifb by network and container ID, the host end by
		// prevResult: a config edited since ADD that no longer validates
		// does not stop it.
		Lenient: attach.DecodeOnly[netConf],
		Del:     del,
		Check:   check,
		GC:      gc,
	}.Descriptor(hooks)
}

// Plugin is the bandwidth plugin's descriptor.
var Plugin = New(attach.Hooks{})
