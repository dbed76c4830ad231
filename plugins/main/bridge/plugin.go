// Package bridge is the bridge plugin: it connects a container to a Linux
// bridge in the host namespace through a veth pair, configures the container
// end from the IPAM result, and optionally makes the bridge the container's
// gateway, masquerades its traffic and checks its source MAC.
//
// ADD, in order (each step registers its undo once it succeeded; a failure
// runs the undos in reverse, IPAM release included):
//
//	bridge      ensure the bridge (create if missing), accept_ra=0, up
//	ipam        delegate ADD to the IPAM plugin
//	veth        veth pair: container end CNI_IFNAME, host end aliased for DEL
//	port        host end on the bridge (hairpin, isolation, VLANs), up
//	container   addresses and routes in the container, arp_notify, gratuitous ARP
//	gateway     gateway address on the bridge (or per-VLAN gateway interface)
//	forwarding  IP forwarding for the families in use
//	masquerade  source NAT rules (iptables or nftables)
//	macspoof    drop frames from the port whose source MAC is not the container's
//	wait        the host end's operstate turns up (netlink events, deadline)
package bridge

import (
	"fmt"
	"time"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/cniforge/plugins/pkg/plugin"
)

// Plugin is the bridge plugin's descriptor.
var Plugin = newPlugin().descriptor()

// bridgePlugin holds what can differ between runs of the plugin: nothing in
// production; tests inject failures through it.
type bridgePlugin struct {
	// failAfter makes ADD fail right after the step of that name succeeded
	// (see the package doc for the names).
	failAfter string
	// beforeUndo, when set, runs after the injected failure and before the
	// undos: tests use it to make the kernel change under a failing ADD as
	// a concurrent ADD would.
	beforeUndo func()
	// portTimeout bounds the wait for the host veth to come up.
	portTimeout time.Duration
}

func newPlugin() *bridgePlugin {
	return &bridgePlugin{portTimeout: 5 * time.Second}
}

func (p *bridgePlugin) descriptor() plugin.Plugin {
	return plugin.Plugin{
		Name:     "bridge",
		Summary:  "connects the container to a Linux bridge through a veth pair",
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

// stepDone is called after each ADD step; it fails where a test asked.
func (p *bridgePlugin) stepDone(name string) error {
	if p.failAfter == name {
		if p.beforeUndo != nil {
			p.beforeUndo()
		}
		return fmt.Errorf("injected failure after step %q", name)
	}
	return nil
}
