package netfilter

import (
	"fmt"
	"net"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ns"
)

// wireRouter makes hostNS a router between a container (10.1.0.5/24,
// fd00:1::5/64 behind veth "eth0") and an outside namespace (10.99.0.2/24,
// fd00:99::2/64). The outside has no route back to the container subnet, so
// the source it sees is the only evidence of what the host did.
func wireRouter(hostNS, contNS, outNS *ns.NetNS) error {
	h, err := hostNS.Handle()
	if err != nil {
		return err
	}
	defer h.Close()
	pairs := []struct {
		host, peer string
		peerNS     *ns.NetNS
		hostAddrs  []string
		peerAddrs  []string
		peerRoutes []string // default gateways of the peer
	}{
		{"vc", "eth0", contNS, []string{"10.1.0.1/24", "fd00:1::1/64"}, []string{"10.1.0.5/24", "fd00:1::5/64"}, []string{"10.1.0.1", "fd00:1::1"}},
		{"vo", "eth0", outNS, []string{"10.99.0.1/24", "fd00:99::1/64"}, []string{"10.99.0.2/24", "fd00:99::2/64"}, nil},
	}
	for _, p := range pairs {
		veth := &netlink.Veth{
			LinkAttrs:     netlink.LinkAttrs{Name: p.host},
			PeerName:      p.peer,
			PeerNamespace: netlink.NsFd(int(p.peerNS.Fd())),
		}
		if err := h.LinkAdd(veth); err != nil {
			return fmt.Errorf("add veth %s: %w", p.host, err)
		}
		if err := configure(h, p.host, p.hostAddrs, nil); err != nil {
			return err
		}
		ph, err := p.peerNS.Handle()
		if err != nil {
			return err
		}
		err = configure(ph, p.peer, p.peerAddrs, p.peerRoutes)
		ph.Close()
		if err != nil {
			return err
		}
	}
	return hostNS.Do(func() error {
		if err := ip.SetSysctl("net/ipv4/ip_forward", "1"); err != nil {
			return err
		}
		return ip.SetSysctl("net/ipv6/conf/all/forwarding", "1")
	})
}

func configure(h *netlink.Handle, name string, addrs, gws []string) error {
	link, err := h.LinkByName(name)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		addr, err := netlink.ParseAddr(a)
		if err != nil {
			return err
		}
		addr.Flags = unix.IFA_F_NODAD // test addresses are unique: skip the DAD wait
		if err := h.AddrAdd(link, addr); err != nil {
			return fmt.Errorf("add %s to %s: %w", a, name, err)
		}
	}
	if err := h.LinkSetUp(link); err != nil {
		return err
	}
	for _, gw := range gws {
		if err := h.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Gw: net.ParseIP(gw)}); err != nil {
			return fmt.Errorf("route via %s on %s: %w", gw, name, err)
		}
	}
	return nil
}

// udpSource sends one UDP datagram from contNS to dst (an address in outNS)
// and returns the source address outNS received it from.
func udpSource(contNS, outNS *ns.NetNS, dst string) (string, error) {
	var conn *net.UDPConn
	if err := outNS.Do(func() (err error) {
		conn, err = net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(dst)})
		return err
	}); err != nil {
		return "", err
	}
	defer conn.Close()
	port := conn.LocalAddr().(*net.UDPAddr).Port
	if err := contNS.Do(func() error {
		c, err := net.DialUDP("udp", nil, &net.UDPAddr{IP: net.ParseIP(dst), Port: port})
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("masq?"))
		return err
	}); err != nil {
		return "", err
	}
	// A deadline so a lost datagram fails the test instead of hanging it.
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 16)
	_, from, err := conn.ReadFromUDP(buf)
	if err != nil {
		return "", fmt.Errorf("receive in %s: %w", outNS.Path(), err)
	}
	return from.IP.String(), nil
}
