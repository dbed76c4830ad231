package tap

import (
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/link"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/result"
)

// add makes the tap: resolve, tap, bridge port, up, IPAM, then the shared tail.
// Each change pushes its undo as soon as it exists; the frame runs them in
// reverse on a failure.
func (t *tapPlugin) add(a *attach.Attachment, c *config) (types.Result, error) {
	ifName := a.Args.IfName
	contNS, contH, err := a.Container()
	if err != nil {
		return nil, err
	}

	br, err := resolve(contNS, contH, ifName, c.Bridge)
	if err != nil {
		return nil, err
	}
	if err := a.Step(StepResolve); err != nil {
		return nil, err
	}

	spec := tapSpec{name: ifName, multiQueue: c.MultiQueue, owner: c.Owner, group: c.Group, selinuxContext: c.SelinuxContext}
	selinuxOn := c.SelinuxContext != "" && t.selinuxOn()
	if c.SelinuxContext != "" && !selinuxOn {
		a.Log.Info("SELinux is off: selinuxContext not applied", "selinuxContext", c.SelinuxContext)
	}
	if err := createTap(contNS, spec, selinuxOn); err != nil {
		return nil, err
	}
	a.Undo.Push("delete tap "+ifName, func() error { return ip.DelLinkByName(contH, ifName) })
	tapLink, err := setLinkAttrs(contNS, contH, ifName, c, a.Alias())
	if err != nil {
		return nil, err
	}
	if err := a.Step(StepTap); err != nil {
		return nil, err
	}

	if br != nil {
		if err := contH.LinkSetMaster(tapLink, br); err != nil {
			return nil, fmt.Errorf("bridge: make tap %q a port of %q in %s: %w", ifName, c.Bridge, contNS.Path(), err)
		}
	}
	if err := a.Step(StepBridge); err != nil {
		return nil, err
	}

	// Up before IPAM, as upstream: an IPAM plugin working on the
	// interface (dhcp) finds it there and up.
	if err := contH.LinkSetUp(tapLink); err != nil {
		return nil, fmt.Errorf("set tap %q up in %s: %w", ifName, contNS.Path(), err)
	}
	var addrs func() (*current.Result, error)
	if c.HasIPAM() {
		addrs = a.IPAMAdd
	}
	// The tail: notify sysctls, up, addresses (no DAD wait) and routes, a
	// gratuitous ARP, the result. A tap has no carrier until a VMM opens
	// it; addresses and routes need the link only administratively up.
	return link.Configure(a, addrs, c.DNS)
}

// resolve checks, changing nothing, that ifName is free in the container
// and that bridge (when set) is a bridge there, and returns it. A missing
// or wrong bridge is a config error (7) naming it and the namespace.
func resolve(contNS *ns.NetNS, contH *netlink.Handle, ifName, bridge string) (*netlink.Bridge, error) {
	if err := ip.CheckNameFree(contNS, contH, ifName); err != nil {
		return nil, err
	}
	if bridge == "" {
		return nil, nil
	}
	l, err := ip.LinkByName(contH, bridge)
	if errors.Is(err, ip.ErrLinkNotFound) {
		return nil, result.InvalidConfig(fmt.Errorf("bridge: %q not found in %s", bridge, contNS.Path()))
	}
	if err != nil {
		return nil, fmt.Errorf("bridge: in %s: %w", contNS.Path(), err)
	}
	br, ok := l.(*netlink.Bridge)
	if !ok {
		return nil, result.InvalidConfig(fmt.Errorf("bridge: %q in %s is a %s, not a bridge", bridge, contNS.Path(), l.Type()))
	}
	return br, nil
}

// setLinkAttrs gives the new tap its MTU, MAC and alias.
func setLinkAttrs(contNS *ns.NetNS, contH *netlink.Handle, ifName string, c *config, alias string) (netlink.Link, error) {
	link, err := ip.LinkByName(contH, ifName)
	if err != nil {
		return nil, fmt.Errorf("in %s: %w", contNS.Path(), err)
	}
	if c.MTU != 0 {
		if err := contH.LinkSetMTU(link, c.MTU); err != nil {
			return nil, fmt.Errorf("mtu: set %d on %q in %s: %w", c.MTU, ifName, contNS.Path(), err)
		}
	}
	if c.mac != nil {
		if err := contH.LinkSetHardwareAddr(link, c.mac); err != nil {
			return nil, fmt.Errorf("mac: set %s on %q in %s: %w", c.mac, ifName, contNS.Path(), err)
		}
	}
	if err := contH.LinkSetAlias(link, alias); err != nil {
		return nil, fmt.Errorf("set alias of %q in %s: %w", ifName, contNS.Path(), err)
	}
	return ip.LinkByName(contH, ifName)
}
