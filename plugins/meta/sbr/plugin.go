// Package sbr is the source-based routing plugin, a chained plugin: traffic
// from the addresses of CNI_IFNAME leaves through a routing table of its
// own, so a container with several interfaces answers through the one a
// packet came in on.
//
// It runs on the frame in pkg/attach in chained mode (ADD needs
// prevResult, code 7 without it). ADD, in the container namespace, holding
// a lock on it (two sbr ADDs there pick tables in turn):
//
//	(resolve)  the interface's addresses from prevResult (code 7 if none);
//	           the table: "table", or the first from 100 up that no rule
//	           points at and no route is in
//	rules      "from <addr>/32 (/128) lookup <table>" per address
//	routes     (not with "table") the interface's main-table routes move to
//	           the table, plus a default route via the address's gateway
//	           ("gateways", else prevResult's)
//	hints      (addSourceHints) the address as preferred source on the
//	           interface's subnet routes
//
// The result is prevResult, unchanged. DEL removes the rules from the
// interface's addresses (or prevResult's, when the interface is gone) and,
// without "table", the routes of their tables on the interface; it
// succeeds when the namespace is gone. CHECK verifies the rules and the
// routes. GC and STATUS have nothing to do: everything sbr makes lives in
// the container namespace and dies with it.
package sbr

import (
	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/plugin"
)

// The steps of ADD, in order, as passed to attach.Hooks.AfterStep.
const (
	StepRules  = "rules"  // the source rules exist
	StepRoutes = "routes" // the routes are in the table
	StepHints  = "hints"  // the source hints are set
)

// AddSteps lists the steps of ADD in the order they run.
var AddSteps = []string{StepRules, StepRoutes, StepHints}

// New returns the sbr plugin's descriptor running with hooks.
func New(hooks attach.Hooks) plugin.Plugin {
	return attach.Plugin[*netConf]{
		Name:    "sbr",
		Summary: "source-based routing: traffic from an interface's addresses through a table of its own",
		Chained: true,
		Parse:   parse,
		Add:     add,
		// DEL finds the rules by CNI_IFNAME's addresses and "table": a
		// config edited since ADD that no longer validates does not stop it.
		Lenient: attach.DecodeOnly[netConf],
		Del:     del,
		Check:   check,
	}.Descriptor(hooks)
}

// Plugin is the sbr plugin's descriptor.
var Plugin = New(attach.Hooks{})
