package tap

import (
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ipam"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/result"
)

// add makes the tap: resolve, IPAM, tap, bridge port, addresses, announce.
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

	var res *current.Result
	if c.HasIPAM() {
		if res, err = a.IPAMAdd(); err != nil {
			return nil, err
		}
	}
	if err := a.Step(StepIPAM); err != nil {
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
	link, err := setLinkAttrs(contNS, contH, ifName, c, a.Alias())
	if err != nil {
		return nil, err
	}
	if err := a.Step(StepTap); err != nil {
		return nil, err
	}

	if br != nil {
		if err := contH.LinkSetMaster(link, br); err != nil {
			return nil, fmt.Errorf("bridge: make tap %q a port of %q in %s: %w", ifName, c.Bridge, contNS.Path(), err)
		}
	}
	if err := a.Step(StepBridge); err != nil {
		return nil, err
	}

	if err := configure(contNS, contH, ifName, res); err != nil {
		return nil, err
	}
	if err := a.Step(StepConfigure); err != nil {
		return nil, err
	}

	if res != nil {
		if err := contNS.Do(func() error { return ip.AnnounceIPv4(link, attach.IPs(res.IPs)) }); err != nil {
			// arp_notify announces the address too once a VMM brings the
			// carrier up; a lost packet is no reason to fail.
			a.Log.Warn("gratuitous arp failed", "err", err)
		}
	}
	if err := a.Step(StepAnnounce); err != nil {
		return nil, err
	}

	// Read back: the MAC the kernel picked when the config named none.
	if link, err = ip.LinkByName(contH, ifName); err != nil {
		return nil, fmt.Errorf("in %s: %w", contNS.Path(), err)
	}
	return buildResult(c, a.Args.Netns, link, res), nil
}

// resolve checks, changing nothing, that ifName is free in the container
// and that bridge (when set) is a bridge there, and returns it. A missing
// or wrong bridge is a config error (7) naming it and the namespace.
func resolve(contNS *ns.NetNS, contH *netlink.Handle, ifName, bridge string) (*netlink.Bridge, error) {
	if _, err := ip.LinkByName(contH, ifName); err == nil {
		return nil, fmt.Errorf("a link %q already exists in %s", ifName, contNS.Path())
	} else if !errors.Is(err, ip.ErrLinkNotFound) {
		return nil, fmt.Errorf("in %s: %w", contNS.Path(), err)
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

// configure brings the tap up with arp_notify and ndisc_notify on, and, with
// IPAM, its addresses (no DAD wait: IPAM made them unique) and routes. A tap
// has no carrier until a VMM opens it; addresses and routes need only the
// link to be administratively up.
func configure(contNS *ns.NetNS, contH *netlink.Handle, ifName string, res *current.Result) error {
	if err := contNS.Do(func() error {
		if err := ip.SetArpNotify(ifName); err != nil {
			return err
		}
		// No IPv6 on the link (disabled) is not an error: nothing to notify.
		_ = ip.SetSysctl(fmt.Sprintf("net/ipv6/conf/%s/ndisc_notify", ifName), "1") // best effort: see above
		return nil
	}); err != nil {
		return fmt.Errorf("in %s: %w", contNS.Path(), err)
	}
	if res == nil {
		link, err := ip.LinkByName(contH, ifName)
		if err != nil {
			return fmt.Errorf("in %s: %w", contNS.Path(), err)
		}
		if err := contH.LinkSetUp(link); err != nil {
			return fmt.Errorf("set %q up in %s: %w", ifName, contNS.Path(), err)
		}
		return nil
	}
	// A result for the tap alone: every address is the tap's.
	own := &current.Result{Routes: res.Routes}
	for _, ipc := range res.IPs {
		ipc := *ipc
		ipc.Interface = nil
		own.IPs = append(own.IPs, &ipc)
	}
	if err := ipam.ConfigureIface(contH, ifName, own, ipam.ConfigureOptions{}); err != nil {
		return fmt.Errorf("in %s: %w", contNS.Path(), err)
	}
	return nil
}

// buildResult is upstream's shape: the tap with its sandbox and MAC, every
// address on it, IPAM's routes, the config's DNS (IPAM's when it has none).
func buildResult(c *config, sandbox string, link netlink.Link, ipamRes *current.Result) *current.Result {
	out := &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{{Name: link.Attrs().Name, Mac: link.Attrs().HardwareAddr.String(), Sandbox: sandbox}},
	}
	if ipamRes != nil {
		idx := 0
		for _, ipc := range ipamRes.IPs {
			ipc := *ipc
			ipc.Interface = &idx
			out.IPs = append(out.IPs, &ipc)
		}
		out.Routes = ipamRes.Routes
		out.DNS = ipamRes.DNS
	}
	if !c.DNS.IsEmpty() {
		out.DNS = c.DNS
	}
	return out
}
