// Package firewall is the firewall plugin: chained after an interface
// plugin (bridge, ptp), it lets the container's traffic through the host's
// forward filter, in front of whatever policy the host has, and optionally
// drops traffic between bridges (ingressPolicy same-bridge) or within one
// (isolated). The rules and their layout are pkg/netfilter/forward's: on iptables
// (iptables.go) upstream's chains CNI-FORWARD, CNI-ADMIN and
// CNI-ISOLATION-STAGE-1/2 in the filter table; on nftables
// (nftrules.go) a table of our own, inet cni_firewall, whose
// accepts set a mark bit that a drop policy elsewhere lets through.
//
// It runs on the frame in pkg/attach. ADD, in order (each step pushes its
// undo; a failure or panic runs them in reverse):
//
//	resolve  prevResult required (code 7); its addresses; the bridge for
//	         same-bridge/isolated (the prevResult interface without
//	         sandbox); the backend (absent/"": firewalld when it answers on
//	         the system D-Bus, else iptables)
//	rules    iptables: the forward rules, one iptables-restore per family;
//	         nftables: the forward rules, one netlink batch;
//	         firewalld: each address a source of firewalldZone
//
// ADD prints prevResult unchanged. DEL removes the attachment's rules,
// whatever the backend at ADD was, and upstream's uncommented rules for the
// addresses of a cached prevResult; it needs neither prevResult nor
// CNI_NETNS. CHECK compares the rules with prevResult. GC removes the rules
// of this network's attachments not listed. STATUS fails with code 50 when
// the chosen backend cannot be used.
package firewall

import (
	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/plugin"
)

// The steps of ADD, in order, as passed to attach.Hooks.AfterStep.
const (
	StepResolve = "resolve" // prevResult read, backend chosen
	StepRules   = "rules"   // forward rules installed
)

// AddSteps lists the steps of ADD in the order they run.
var AddSteps = []string{StepResolve, StepRules}

var frame = attach.Plugin[*netConf]{
	Name:    "firewall",
	Summary: "allows a container's traffic through the host's forward filter",
	Parse:   parse,
	Add:     add,
	Lenient: parseLenient,
	Del:     del,
	Check:   check,
	GC:      gc,
	Status:  status,
}

// New returns the firewall plugin's descriptor running with hooks.
func New(hooks attach.Hooks) plugin.Plugin { return frame.Descriptor(hooks) }

// Plugin is the firewall plugin's descriptor.
var Plugin = New(attach.Hooks{})
