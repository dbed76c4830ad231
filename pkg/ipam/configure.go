package ipam

import (
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/types"
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

// UsesLink says whether IPAM plugin typ may need the container interface
// to be up while it runs: dhcp acquires its lease on it. host-local and
// static only hand out addresses, and "" is no IPAM. Any other type is
// taken to need it, as upstream's order (link up, then IPAM) allows.
func UsesLink(typ string) bool {
	switch typ {
	case "", "host-local", "static":
		return false
	}
	return true
}

// ConfigureIface gives ifName the addresses in res that point at it (or
// that point nowhere, when res lists one interface), brings it up, then
// adds the routes of res. h must be bound to the namespace that holds
// ifName.
//
// The addresses go on before the link comes up: with arp_notify set, the
// kernel then announces every IPv4 address itself (a gratuitous ARP each)
// as the link comes up, and the caller need not send one from a packet
// socket, whose close waits out an RCU grace period (about 10 ms).
func ConfigureIface(h *netlink.Handle, ifName string, res *current.Result, opts ConfigureOptions) error {
	link, err := ip.LinkByName(h, ifName)
	if err != nil {
		return err
	}
	idx := -1
	for i, iface := range res.Interfaces {
		if iface.Name == ifName && iface.Sandbox != "" {
			idx = i
		}
	}
	var own []*current.IPConfig
	for _, ipc := range res.IPs {
		if ipc.Interface != nil && *ipc.Interface != idx {
			continue
		}
		own = append(own, ipc)
		addr := &netlink.Addr{IPNet: &ipc.Address}
		if ipc.Address.IP.To4() == nil && !opts.DAD {
			addr.Flags = unix.IFA_F_NODAD
		}
		if err := ip.AddrAdd(h, link, addr); err != nil {
			return err
		}
	}
	if err := h.LinkSetUp(link); err != nil {
		return fmt.Errorf("set %q up: %w", ifName, err)
	}
	for _, r := range res.Routes {
		if err := ip.RouteAdd(h, Route(link.Attrs().Index, r, own)); err != nil {
			return fmt.Errorf("on %q: %w", ifName, err)
		}
	}
	return nil
}

// Route turns an IPAM result's route into a kernel route out of linkIndex:
// via the route's own gateway, or, when it names none, via the gateway of
// the first address in ips of the route's family that has one (as the
// upstream plugins do). A route with a scope narrower than universe (dhcp's
// on-link option 121 routes have link scope) gets no borrowed gateway: the
// kernel refuses a gateway on such a route.
func Route(linkIndex int, r *types.Route, ips []*current.IPConfig) *netlink.Route {
	gw := r.GW
	if gw == nil && (r.Scope == nil || netlink.Scope(*r.Scope) == netlink.SCOPE_UNIVERSE) {
		gw = gatewayFor(r.Dst.IP, ips)
	}
	nr := &netlink.Route{
		LinkIndex: linkIndex,
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
	return nr
}

// gatewayFor picks the first gateway of dst's family.
func gatewayFor(dst net.IP, ips []*current.IPConfig) net.IP {
	v4 := dst.To4() != nil
	for _, ipc := range ips {
		if ipc.Gateway != nil && (ipc.Gateway.To4() != nil) == v4 {
			return ipc.Gateway
		}
	}
	return nil
}
