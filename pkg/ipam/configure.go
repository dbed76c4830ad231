package ipam

import (
	"fmt"
	"net"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/ip"
)

// ConfigureOptions tunes ConfigureIface.
type ConfigureOptions struct {
	// DAD keeps IPv6 duplicate-address detection on. Off by default:
	// addresses IPAM hands out are unique by construction, and DAD would
	// leave them tentative (unusable) for 1-2 s.
	DAD bool
}

// ConfigureIface brings ifName up and gives it the addresses in res that
// point at it (or that point nowhere, when res lists one interface), then
// the routes of res. h must be bound to the namespace that holds ifName.
func ConfigureIface(h *netlink.Handle, ifName string, res *current.Result, opts ConfigureOptions) error {
	link, err := ip.LinkByName(h, ifName)
	if err != nil {
		return err
	}
	if err := h.LinkSetUp(link); err != nil {
		return fmt.Errorf("set %q up: %w", ifName, err)
	}
	idx := -1
	for i, iface := range res.Interfaces {
		if iface.Name == ifName && iface.Sandbox != "" {
			idx = i
		}
	}
	var gws []net.IP
	for _, ipc := range res.IPs {
		if ipc.Interface != nil && *ipc.Interface != idx {
			continue
		}
		addr := &netlink.Addr{IPNet: &ipc.Address}
		if ipc.Address.IP.To4() == nil && !opts.DAD {
			addr.Flags = unix.IFA_F_NODAD
		}
		if err := ip.AddrAdd(h, link, addr); err != nil {
			return err
		}
		if ipc.Gateway != nil {
			gws = append(gws, ipc.Gateway)
		}
	}
	for _, r := range res.Routes {
		gw := r.GW
		if gw == nil {
			gw = gatewayFor(r.Dst.IP, gws)
		}
		nr := &netlink.Route{
			LinkIndex: link.Attrs().Index,
			Dst:       &net.IPNet{IP: r.Dst.IP, Mask: r.Dst.Mask},
			Gw:        gw,
			MTU:       r.MTU,
			AdvMSS:    r.AdvMSS,
			Priority:  r.Priority,
		}
		if r.Table != nil {
			nr.Table = *r.Table
		}
		if r.Scope != nil {
			nr.Scope = netlink.Scope(*r.Scope)
		}
		if err := ip.RouteAdd(h, nr); err != nil {
			return fmt.Errorf("on %q: %w", ifName, err)
		}
	}
	return nil
}

// gatewayFor picks the first gateway of dst's family.
func gatewayFor(dst net.IP, gws []net.IP) net.IP {
	v4 := dst.To4() != nil
	for _, gw := range gws {
		if (gw.To4() != nil) == v4 {
			return gw
		}
	}
	return nil
}
