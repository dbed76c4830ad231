package bridge

import (
	"errors"
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/rollback"
)

// applyGateways fills in what isGateway and isDefaultGateway add to the
// IPAM result, as upstream does: an address without a gateway gets the
// first address of its subnet; isDefaultGateway adds a default route per
// family through that gateway. It returns the gateway addresses (with the
// container's prefix length) to put on the bridge. Pure.
func applyGateways(conf *config, res *current.Result) ([]net.IPNet, error) {
	if !conf.IsGateway {
		return nil, nil
	}
	var gws []net.IPNet
	seen := map[bool]bool{} // family (is IPv4) -> default route handled
	for _, ipc := range res.IPs {
		if ipc.Gateway == nil {
			ipc.Gateway = firstHost(ipc.Address)
		}
		gw := net.IPNet{IP: ipc.Gateway, Mask: ipc.Address.Mask}
		if !containsIPNet(gws, gw) {
			gws = append(gws, gw)
		}
		v4 := ipc.Address.IP.To4() != nil
		if !conf.IsDefaultGateway || seen[v4] {
			continue
		}
		seen[v4] = true
		def := defaultDst(v4)
		found := false
		for _, r := range res.Routes {
			if r.Dst.String() != def.String() {
				continue
			}
			if r.GW != nil && !r.GW.Equal(ipc.Gateway) {
				return nil, fmt.Errorf("isDefaultGateway: ipam already routes %s via %s, not via the bridge gateway %s", def.String(), r.GW, ipc.Gateway)
			}
			r.GW = ipc.Gateway
			found = true
		}
		if !found {
			res.Routes = append(res.Routes, &types.Route{Dst: def, GW: ipc.Gateway})
		}
	}
	return gws, nil
}

func defaultDst(v4 bool) net.IPNet {
	if v4 {
		return net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}
	}
	return net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
}

// firstHost is the first address of a's subnet (10.1.0.0/24 -> 10.1.0.1).
func firstHost(a net.IPNet) net.IP {
	base := a.IP.To4()
	if base == nil {
		base = a.IP.To16()
	}
	mask := a.Mask
	if len(base) == net.IPv4len && len(mask) == net.IPv6len {
		mask = mask[12:]
	}
	gw := make(net.IP, len(base))
	copy(gw, base.Mask(mask))
	gw[len(gw)-1]++
	return gw
}

func containsIPNet(list []net.IPNet, n net.IPNet) bool {
	for _, l := range list {
		if l.String() == n.String() {
			return true
		}
	}
	return false
}

// ensureGateway puts the gateway addresses on the bridge, or with vlan set
// on the per-VLAN gateway interface "<bridge>.<vlan>". An address of the
// same family and an overlapping subnet already there is an error, unless
// forceAddress replaces it. Addresses this ADD added are removed on undo
// when no other port is left on the bridge, and only then are the ones
// they replaced put back. br is the bridge
// as ensureBridge saw it, before this ADD's port joined.
func (a *attachment) ensureGateway(br *netlink.Bridge, gws []net.IPNet, undo *rollback.Stack) error {
	var link netlink.Link = br
	if a.conf.Vlan != 0 {
		l, err := a.ensureVlanGateway(br, undo)
		if err != nil {
			return err
		}
		link = l
	}
	name := link.Attrs().Name
	for _, gw := range gws {
		added, removed, err := ensureAddr(a.hostH, link, gw, a.conf.ForceAddress, a.conf.EnableDad)
		if err != nil || !added {
			// The gateway is not ours to remove (it failed, or was there):
			// only what forceAddress removed comes back.
			if len(removed) > 0 {
				undo.Push("restore addresses of "+name, func() error { return restoreAddrs(a.hostH, link, removed) })
			}
			if err != nil {
				return err
			}
			continue
		}
		gw := gw
		// One step: the replaced addresses come back only once the new
		// gateway is gone. When another attachment keeps it, bringing them
		// back would leave two IPv4 addresses, the conflict forceAddress
		// exists to prevent.
		undo.Push("remove gateway "+gw.String(), func() error {
			if inUse, err := a.bridgeInUse(br); err != nil || inUse {
				return err // another attachment relies on it: keep it
			}
			if err := a.hostH.AddrDel(link, &netlink.Addr{IPNet: &gw}); err != nil {
				if errors.Is(err, unix.ENODEV) {
					return nil // the link is gone, and with it what to restore
				}
				if !errors.Is(err, unix.EADDRNOTAVAIL) {
					return fmt.Errorf("remove %s from %q: %w", gw.String(), name, err)
				}
			}
			return restoreAddrs(a.hostH, link, removed)
		})
	}
	if a.conf.Vlan == 0 {
		// Pin the bridge's MAC: without an explicit one it takes the lowest
		// of its ports', and changes as containers come and go. The MAC
		// pinned is the one it had before this ADD's port joined (upstream's
		// choice), not the container veth's it may have taken since.
		if mac := br.Attrs().HardwareAddr; len(mac) == 6 {
			if err := a.hostH.LinkSetHardwareAddr(br, mac); err != nil {
				return fmt.Errorf("pin MAC %s of bridge %q: %w", mac, name, err)
			}
		}
	}
	return nil
}

// ensureAddr adds gw to link unless it is there; added reports whether it
// did. With force, addresses in gw's way are removed first and returned in
// removed (also when a later step fails) so the caller can put them back.
func ensureAddr(h *netlink.Handle, link netlink.Link, gw net.IPNet, force, dad bool) (added bool, removed []netlink.Addr, err error) {
	name := link.Attrs().Name
	addrs, err := ip.AddrList(h, link, ip.Family(gw.IP))
	if err != nil {
		return false, nil, fmt.Errorf("addresses of %q: %w", name, err)
	}
	for _, have := range addrs {
		if have.IPNet.String() == gw.String() {
			return false, removed, nil
		}
		if have.IP.IsLinkLocalUnicast() {
			continue
		}
		// Several IPv6 subnets can share a bridge; IPv4 gets one gateway.
		if gw.IP.To4() == nil && !have.IPNet.Contains(gw.IP) && !gw.Contains(have.IP) {
			continue
		}
		if !force {
			return false, removed, fmt.Errorf("bridge %q already has address %s, not the gateway %s (set forceAddress to replace it)",
				name, have.IPNet, gw.String())
		}
		if err := h.AddrDel(link, &have); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
			return false, removed, fmt.Errorf("remove %s from %q: %w", have.IPNet, name, err)
		}
		removed = append(removed, have)
	}
	addr := &netlink.Addr{IPNet: &gw}
	if gw.IP.To4() == nil && !dad {
		// The gateway must answer at once; IPAM made it unique.
		addr.Flags = unix.IFA_F_NODAD
	}
	if err := ip.AddrAdd(h, link, addr); err != nil {
		return false, removed, err
	}
	return true, removed, nil
}

// restoreAddrs adds back addresses forceAddress removed, as they were
// (label, scope, broadcast); lifetimes are not restored, the addresses
// a bridge is given are permanent.
func restoreAddrs(h *netlink.Handle, link netlink.Link, addrs []netlink.Addr) error {
	var errs []error
	for _, have := range addrs {
		a := &netlink.Addr{IPNet: have.IPNet, Label: have.Label, Scope: have.Scope, Broadcast: have.Broadcast}
		if have.IP.To4() == nil {
			// It was in use before this ADD; DAD would only hold it back.
			a.Flags = unix.IFA_F_NODAD
		}
		errs = append(errs, ip.AddrAdd(h, link, a))
	}
	return errors.Join(errs...)
}

// ensureVlanGateway returns the per-VLAN gateway interface "<bridge>.<vlan>":
// one end of a veth pair in the host namespace whose other end is an
// untagged port of the VLAN on the bridge. Shared by every attachment of
// the VLAN, so it is only undone when this ADD created it and no other
// attachment joined the bridge meanwhile (the gateway addresses' check).
func (a *attachment) ensureVlanGateway(br *netlink.Bridge, undo *rollback.Stack) (netlink.Link, error) {
	name := fmt.Sprintf("%s.%d", br.Attrs().Name, a.conf.Vlan)
	if len(name) > 15 {
		return nil, fmt.Errorf("vlan gateway interface name %q is longer than 15 bytes", name)
	}
	if l, err := ip.LinkByName(a.hostH, name); err == nil {
		return l, nil
	} else if !errors.Is(err, ip.ErrLinkNotFound) {
		return nil, err
	}
	peer, err := ip.SetupVeth(a.hostH, ip.VethOptions{ContIfName: name, MTU: br.Attrs().MTU, ContNS: int(a.hostNS.Fd())})
	if err != nil {
		return nil, fmt.Errorf("vlan gateway: %w", err)
	}
	undo.Push("delete vlan gateway "+name, func() error {
		if inUse, err := a.bridgeInUse(br); err != nil || inUse {
			return err // another attachment of the VLAN may route through it
		}
		return ip.DelLinkByName(a.hostH, name)
	})
	a.ownPorts[peer.Attrs().Index] = true
	err = ip.AttachPort(a.hostH, br, peer, ip.PortOptions{Vlan: a.conf.Vlan, KeepDefaultVlan: a.conf.PreserveDefaultVlan})
	if err != nil {
		return nil, err
	}
	gwLink, err := ip.LinkByName(a.hostH, name)
	if err != nil {
		return nil, err
	}
	for _, l := range []netlink.Link{peer, gwLink} {
		if err := a.hostH.LinkSetUp(l); err != nil {
			return nil, fmt.Errorf("set %q up: %w", l.Attrs().Name, err)
		}
	}
	return gwLink, nil
}

// bridgeInUse reports whether br has ports other than those this ADD made.
func (a *attachment) bridgeInUse(br *netlink.Bridge) (bool, error) {
	ports, err := ip.Ports(a.hostH, br.Attrs().Index)
	if err != nil {
		return false, err
	}
	for _, p := range ports {
		if !a.ownPorts[p.Attrs().Index] {
			return true, nil
		}
	}
	return false, nil
}
