package ptp

import (
	"fmt"
	"net"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ipam"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/result"
)

// hostMask is the mask of a single address of ip's family: /32 or /128.
func hostMask(addr net.IP) net.IPMask {
	if addr.To4() != nil {
		return net.CIDRMask(32, 32)
	}
	return net.CIDRMask(128, 128)
}

// subnetOf returns the network an IPAM address belongs to.
func subnetOf(a net.IPNet) *net.IPNet {
	return &net.IPNet{IP: a.IP.Mask(a.Mask), Mask: a.Mask}
}

// containerRoutes is what the container end routes, upstream's shape: per
// address, a link-scope host route to the gateway and the subnet via the
// gateway; then the IPAM routes, via their own gateway or the gateway of
// their family. veth has no IFF_POINTOPOINT, so instead of a point-to-point
// link every destination, even a neighbour in the same subnet, is reached
// through the gateway, that is, through the host.
func containerRoutes(linkIndex int, res *current.Result) []*netlink.Route {
	var routes []*netlink.Route
	for _, ipc := range res.IPs {
		routes = append(routes, &netlink.Route{
			LinkIndex: linkIndex,
			Dst:       &net.IPNet{IP: ipc.Gateway, Mask: hostMask(ipc.Gateway)},
			Scope:     netlink.SCOPE_LINK,
			Src:       ipc.Address.IP,
		})
		if ones, bits := ipc.Address.Mask.Size(); ones == bits {
			continue // a /32 address has no subnet beyond itself
		}
		routes = append(routes, &netlink.Route{
			LinkIndex: linkIndex,
			Dst:       subnetOf(ipc.Address),
			Gw:        ipc.Gateway,
			Scope:     netlink.SCOPE_UNIVERSE,
			Src:       ipc.Address.IP,
		})
	}
	for _, r := range res.Routes {
		routes = append(routes, ipam.Route(linkIndex, r, res.IPs))
	}
	return routes
}

// configureContainer brings the container end up and gives it the IPAM
// addresses and containerRoutes. contH is bound to contNS.
//
// The addresses carry IFA_F_NOPREFIXROUTE: the kernel's "<subnet> dev eth0"
// route would make the container ARP for its neighbours directly, which a
// routed link must not do (upstream adds the route and deletes it again).
// IPv6 addresses also carry IFA_F_NODAD: IPAM hands out unique addresses,
// and DAD would leave them tentative, unusable, for about 1.8 s.
func configureContainer(contNS *ns.NetNS, contH *netlink.Handle, ifName string, res *current.Result) error {
	link, err := ip.LinkByName(contH, ifName)
	if err != nil {
		return fmt.Errorf("in %s: %w", contNS.Path(), err)
	}
	if err := contNS.Do(func() error {
		if hasV4(res) {
			// The kernel announces the address itself (gratuitous ARP)
			// when the link comes up or its MAC changes.
			if err := ip.SetArpNotify(ifName); err != nil {
				return err
			}
		}
		if hasV6(res) {
			return disableDAD(ifName)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("in %s: %w", contNS.Path(), err)
	}
	if err := contH.LinkSetUp(link); err != nil {
		return fmt.Errorf("set %q up in %s: %w", ifName, contNS.Path(), err)
	}
	for _, ipc := range res.IPs {
		addr := &netlink.Addr{
			IPNet: &net.IPNet{IP: ipc.Address.IP, Mask: ipc.Address.Mask},
			Flags: unix.IFA_F_NOPREFIXROUTE,
		}
		if ipc.Address.IP.To4() == nil {
			addr.Flags |= unix.IFA_F_NODAD
		}
		if err := ip.AddrAdd(contH, link, addr); err != nil {
			return fmt.Errorf("in %s: %w", contNS.Path(), err)
		}
	}
	for _, r := range containerRoutes(link.Attrs().Index, res) {
		if err := ip.RouteAdd(contH, r); err != nil {
			return fmt.Errorf("on %q in %s: %w", ifName, contNS.Path(), err)
		}
	}
	return nil
}

func hasV4(res *current.Result) bool {
	for _, ipc := range res.IPs {
		if ipc.Address.IP.To4() != nil {
			return true
		}
	}
	return false
}

func hasV6(res *current.Result) bool {
	for _, ipc := range res.IPs {
		if ipc.Address.IP.To4() == nil {
			return true
		}
	}
	return false
}

// validateIPAMResult refuses an IPAM result ptp cannot wire (the frame
// already checked that it is complete): an address without a gateway (the
// host end's address and the container's next hop), or with itself as
// gateway. The IPAM config is what to fix: code 7 naming the key.
func validateIPAMResult(ipamType string, res *current.Result) error {
	for _, ipc := range res.IPs {
		if ipc.Gateway == nil {
			return result.InvalidConfig(fmt.Errorf("ipam: %s returned %s without a gateway; ptp routes through it", ipamType, ipc.Address.String()))
		}
		if ipc.Gateway.Equal(ipc.Address.IP) {
			return result.InvalidConfig(fmt.Errorf("ipam: %s returned %s with itself as gateway", ipamType, ipc.Address.String()))
		}
	}
	return nil
}

// reannounce has the kernel send a gratuitous ARP for each IPv4 address of
// the container end (configureContainer set arp_notify): the end came up
// before its addresses, when its peer could be down still.
func reannounce(contH *netlink.Handle, contLink netlink.Link, res *current.Result) error {
	if !hasV4(res) {
		return nil
	}
	return ip.Reannounce(contH, contLink)
}
