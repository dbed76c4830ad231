package ptp

import (
	"fmt"
	"net"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/ip"
)

// hostAddrs is what the host end holds: each gateway as a /32 (/128). Every
// ptp host end of a network holds the same gateway addresses; the kernel
// allows that, and it is what lets each container's gateway answer on its
// own link.
func hostAddrs(res *current.Result) []*netlink.Addr {
	var addrs []*netlink.Addr
	for _, ipc := range res.IPs {
		a := &netlink.Addr{IPNet: &net.IPNet{IP: ipc.Gateway, Mask: hostMask(ipc.Gateway)}}
		if ipc.Gateway.To4() == nil {
			// Unique by construction as the container's are; DAD would
			// hold the gateway tentative and the container unreachable.
			a.Flags = unix.IFA_F_NODAD
		}
		addrs = append(addrs, a)
	}
	return addrs
}

// hostRoutes is a link-scope host route to each container address through
// the host end.
func hostRoutes(linkIndex int, res *current.Result) []*netlink.Route {
	var routes []*netlink.Route
	for _, ipc := range res.IPs {
		routes = append(routes, &netlink.Route{
			LinkIndex: linkIndex,
			Dst:       &net.IPNet{IP: ipc.Address.IP, Mask: hostMask(ipc.Address.IP)},
			Scope:     netlink.SCOPE_LINK,
		})
	}
	return routes
}

// configureHost gives the host end (up since setupVeth) hostAddrs and
// hostRoutes. hostH is bound to the host namespace.
func configureHost(hostH *netlink.Handle, hostPath string, link netlink.Link, res *current.Result) error {
	name := link.Attrs().Name
	for _, a := range hostAddrs(res) {
		if err := ip.AddrAdd(hostH, link, a); err != nil {
			return fmt.Errorf("in %s: %w", hostPath, err)
		}
	}
	for _, r := range hostRoutes(link.Attrs().Index, res) {
		if err := ip.RouteAdd(hostH, r); err != nil {
			return fmt.Errorf("on %q in %s: %w", name, hostPath, err)
		}
	}
	return nil
}
