// Package bridge is the bridge plugin: it connects a container to a Linux
// bridge in the host namespace through a veth pair, configures the container
// end from the IPAM result, and optionally makes the bridge the container's
// gateway, masquerades its traffic and checks its source MAC. It runs on
// the frame in pkg/attach.
//
// ADD, in order (each step registers its undo once it succeeded; a failure
// or a panic runs the undos in reverse, IPAM release included; the names
// are the steps attach.Hooks.AfterStep sees):
//
//	bridge      ensure the bridge (create if missing), accept_ra=0, up
//	veth        veth pair: container end CNI_IFNAME, host end aliased for DEL
//	port        host end on the bridge (hairpin, isolation, VLANs); both ends up
//	wait        the host end's operstate turns up (netlink events, deadline)
//	ipam        delegate ADD to the IPAM plugin, validate its result and
//	            apply the gateway settings to it
//	container   addresses and routes in the container, arp_notify, gratuitous ARP
//	gateway     gateway address on the bridge (or per-VLAN gateway interface)
//	forwarding  IP forwarding for the families in use
//	masquerade  source NAT rules (iptables or nftables)
//	macspoof    drop frames from the port whose source MAC is not the container's
//
// The container interface exists, sits on the bridge and is up before IPAM
// runs, as upstream: the dhcp IPAM plugin acquires its lease on it, from
// inside the container namespace. It waits for the port before IPAM, so the
// first DHCP packet is not dropped by a queue the kernel has not activated.
package bridge

import (
	"time"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/attach/masquerade"
	"github.com/cniforge/plugins/pkg/ipam"
	"github.com/cniforge/plugins/pkg/plugin"
)

// AddSteps are the ADD steps in order, as attach.Hooks.AfterStep sees them.
var AddSteps = []string{"bridge", "veth", "port", "wait", "ipam", "container", "gateway", "forwarding", "masquerade", "macspoof"}

// portTimeout bounds the wait for the host veth to come up.
const portTimeout = 5 * time.Second

var frame = attach.Plugin[*config]{
	Name:    "bridge",
	Summary: "connects the container to a Linux bridge through a veth pair",
	IPAM:    ipam.Frame{},
	Parse:   parse,
	Add:     add,
	// DEL finds the veth by CNI_IFNAME and its alias, the rules by owner
	// and IPAM by ipam: a config edited since ADD that no longer validates
	// does not stop it.
	Lenient: attach.DecodeOnly[config],
	Del:     del,
	Check:   check,
	GC:      gc,
	Masq:    masquerade.Frame{},
}

// New returns the bridge plugin's descriptor running with hooks.
func New(hooks attach.Hooks) plugin.Plugin { return frame.Descriptor(hooks) }

// Plugin is the bridge plugin's descriptor.
var Plugin = New(attach.Hooks{})
