package masq

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

// wireRouter makes hostNS a router between a container (10.1.0.5/24,
// fd00:1::5/64 behind veth "eth0") and an outside namespace (10.99.0.2/24,
// fd00:99::2/64). The outside has no route back to the container subnet, so
// the source it sees (testutil.UDPSource) is the only evidence of what the
// host did.
func wireRouter(hostNS, contNS, outNS *ns.NetNS) error {
	if err := testutil.ConnectNS(
		testutil.VethEnd{NS: hostNS, Name: "vc", Addrs: []string{"10.1.0.1/24", "fd00:1::1/64"}},
		testutil.VethEnd{NS: contNS, Name: "eth0", Addrs: []string{"10.1.0.5/24", "fd00:1::5/64"}},
	); err != nil {
		return err
	}
	if err := testutil.ConnectNS(
		testutil.VethEnd{NS: hostNS, Name: "vo", Addrs: []string{"10.99.0.1/24", "fd00:99::1/64"}},
		testutil.VethEnd{NS: outNS, Name: "eth0", Addrs: []string{"10.99.0.2/24", "fd00:99::2/64"}},
	); err != nil {
		return err
	}
	if err := defaultRoutes(contNS, "eth0", "10.1.0.1", "fd00:1::1"); err != nil {
		return err
	}
	return hostNS.Do(func() error {
		if err := ip.SetSysctl("net/ipv4/ip_forward", "1"); err != nil {
			return err
		}
		return ip.SetSysctl("net/ipv6/conf/all/forwarding", "1")
	})
}

// defaultRoutes adds a default route via each of gws on ifName in n.
func defaultRoutes(n *ns.NetNS, ifName string, gws ...string) error {
	h, err := n.Handle()
	if err != nil {
		return err
	}
	defer h.Close()
	link, err := h.LinkByName(ifName)
	if err != nil {
		return err
	}
	for _, gw := range gws {
		if err := h.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Gw: net.ParseIP(gw)}); err != nil {
			return fmt.Errorf("route via %s on %s: %w", gw, ifName, err)
		}
	}
	return nil
}
