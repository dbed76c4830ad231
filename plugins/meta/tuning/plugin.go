// Package tuning is the tuning plugin, a chained plugin: it changes
// sysctls and link attributes of the interface a plugin before it in the
// conflist made, inside the container, and puts them back on DEL.
//
// It runs on the frame in pkg/attach in chained mode (ADD needs
// prevResult, code 7 without it). ADD, in order (each step pushes its
// undo; a failure or panic runs them in reverse):
//
//	allowlist  (before any change) every sysctl key matches a line of the
//	           allowlist file, when that file exists (code 7 otherwise)
//	state      the values before the change go to
//	           <dataDir>/<containerID>_<ifname>.json, atomically, in
//	           upstream's format (plus the old sysctl values)
//	sysctl     each sysctl written under /proc/sys/net in the container
//	link       MTU, MAC, promisc, allmulti, txQLen of CNI_IFNAME
//
// The result is prevResult with the interface's new MAC. DEL restores
// what the state file holds (an upstream ADD's file too) and removes the
// file; with the namespace or the link gone it only removes the file.
// CHECK compares every configured value with the kernel. GC removes the
// state files this suite wrote for the network that name an attachment
// not listed. STATUS has nothing to report.
package tuning

import (
	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/plugin"
)

// The steps of ADD, in order, as passed to attach.Hooks.AfterStep.
const (
	StepState  = "state"  // the state file is written
	StepSysctl = "sysctl" // the sysctls are written
	StepLink   = "link"   // the link attributes are changed
)

// AddSteps lists the steps of ADD in the order they run.
var AddSteps = []string{StepState, StepSysctl, StepLink}

// DefaultAllowlist is the file whose lines, regular expressions, are the
// sysctl keys ADD accepts when it exists: upstream's path.
const DefaultAllowlist = "/etc/cni/tuning/allowlist.conf"

// Options are what a test changes about the plugin.
type Options struct {
	Hooks attach.Hooks
	// Allowlist is the allowlist file; "" is DefaultAllowlist.
	Allowlist string
	// SetSysctl, when set, replaces the write of a sysctl by ADD's sysctl
	// step; it runs inside the container namespace (in ns.Do), where a
	// test makes it fail or panic.
	SetSysctl func(path, value string) error
}

// New returns the tuning plugin's descriptor running with opts.
func New(opts Options) plugin.Plugin {
	t := &tuner{allowlist: opts.Allowlist, setSysctl: opts.SetSysctl}
	if t.allowlist == "" {
		t.allowlist = DefaultAllowlist
	}
	if t.setSysctl == nil {
		t.setSysctl = ip.SetSysctl
	}
	return attach.Plugin[*netConf]{
		Name:    "tuning",
		Summary: "sysctls and link attributes of a container interface, restored on DEL",
		Chained: true,
		Parse:   parse,
		Add:     t.add,
		Lenient: parseLenient,
		Del:     del,
		Check:   check,
		GC:      gc,
	}.Descriptor(opts.Hooks)
}

// Plugin is the tuning plugin's descriptor.
var Plugin = New(Options{})

type tuner struct {
	allowlist string
	setSysctl func(path, value string) error
}
