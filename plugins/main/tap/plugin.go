// Package tap is the tap plugin: a persistent tap device in the container
// namespace, for a VM in a pod (KubeVirt, Kata) to open, optionally a port
// of a bridge that already exists there, optionally with IPAM addresses.
//
// It runs on the frame in pkg/attach. ADD, in order (each step pushes its
// undo; a failure or panic runs them in reverse, IPAM release included):
//
//	resolve     look up, changing nothing: CNI_IFNAME is free in the
//	            container; bridge, when set, exists there and is a bridge
//	tap         the tap, persistent, with owner, group, multi-queue,
//	            SELinux label, then its MTU, MAC and alias
//	bridge      the tap becomes a port of bridge (when set)
//	ipam        the tap up, then (as upstream: an IPAM plugin working on
//	            the interface finds it) IPAM ADD (when ipam.type is set)
//	configure   arp_notify/ndisc_notify, IPAM addresses and
//	            routes, a gratuitous ARP (pkg/link's Finish)
//
// The tap is made through the tun ioctls on /dev/net/tun, never by exec of
// `ip tuntap`. DEL deletes the tap when it is a tuntap carrying this
// attachment's alias (or none: an upstream ADD tags nothing); a namespace
// that is gone took the tap with it. GC and STATUS are the frame's: they
// go to IPAM; a tap lives and dies with its namespace and needs no
// collection.
package tap

import (
	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ipam"
	"github.com/cniforge/plugins/pkg/link"
	"github.com/cniforge/plugins/pkg/plugin"
)

// The steps of ADD, in order, as passed to attach.Hooks.AfterStep.
const (
	StepResolve   = "resolve"          // lookups done, nothing changed
	StepTap       = "tap"              // the tap exists with its MTU, MAC and alias
	StepBridge    = "bridge"           // the tap is a port of the bridge (when set)
	StepIPAM      = link.StepIPAM      // the tap is up, IPAM reserved the addresses (when configured)
	StepConfigure = link.StepConfigure // addresses and routes, announced
)

// AddSteps lists the steps of ADD in the order they run.
var AddSteps = []string{StepResolve, StepTap, StepBridge, StepIPAM, StepConfigure}

// New returns the tap plugin's descriptor running with hooks.
func New(hooks attach.Hooks) plugin.Plugin { return newPlugin(selinuxEnabled).Descriptor(hooks) }

// newPlugin builds the frame; selinuxOn tells whether SELinux is on, asked
// once per ADD (a field, so tests can say).
func newPlugin(selinuxOn func() bool) attach.Plugin[*config] {
	t := &tapPlugin{selinuxOn: selinuxOn}
	return attach.Plugin[*config]{
		Name:    "tap",
		Summary: "a tap device in the container, optionally on a bridge there",
		IPAM:    ipam.Frame{},
		Parse:   parse,
		Add:     t.add,
		// DEL finds the tap by CNI_IFNAME and its alias, IPAM by ipam: a
		// config edited since ADD that no longer validates does not stop it.
		Lenient: attach.DecodeOnly[config],
		Del:     del,
		Check:   check,
	}
}

type tapPlugin struct {
	selinuxOn func() bool
}

// Plugin is the tap plugin's descriptor.
var Plugin = New(attach.Hooks{})
