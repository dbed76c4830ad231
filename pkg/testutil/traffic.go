package testutil

import (
	"fmt"
	"net"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/ns"
)

// VethEnd is one end of a veth pair: the namespace it is in, its name and
// the addresses ("ip/prefix") to put on it.
type VethEnd struct {
	NS    *ns.NetNS
	Name  string
	Addrs []string
}

// ConnectNS links a.NS and b.NS with a veth pair, adds each end's addresses
// and brings both ends up. The pair is made from a.NS with b's end created
// in b.NS; nothing happens in the calling thread's namespace. For callers
// outside Ginkgo too.
func ConnectNS(a, b VethEnd) error {
	h, err := a.NS.Handle()
	if err != nil {
		return err
	}
	defer h.Close()
	la := netlink.NewLinkAttrs()
	la.Name = a.Name
	veth := &netlink.Veth{LinkAttrs: la, PeerName: b.Name, PeerNamespace: netlink.NsFd(int(b.NS.Fd()))}
	if err := h.LinkAdd(veth); err != nil {
		return fmt.Errorf("add veth %s in %s: %w", a.Name, a.NS.Path(), err)
	}
	if err := configureEnd(h, a); err != nil {
		return err
	}
	bh, err := b.NS.Handle()
	if err != nil {
		return err
	}
	defer bh.Close()
	return configureEnd(bh, b)
}

func configureEnd(h *netlink.Handle, e VethEnd) error {
	link, err := h.LinkByName(e.Name)
	if err != nil {
		return fmt.Errorf("%s in %s: %w", e.Name, e.NS.Path(), err)
	}
	for _, s := range e.Addrs {
		addr, err := netlink.ParseAddr(s)
		if err != nil {
			return err
		}
		// Test addresses are unique: skip duplicate address detection, so
		// an IPv6 address can be used (bound to) at once.
		addr.Flags = unix.IFA_F_NODAD
		if err := h.AddrAdd(link, addr); err != nil {
			return fmt.Errorf("add %s to %s in %s: %w", s, e.Name, e.NS.Path(), err)
		}
	}
	if err := h.LinkSetUp(link); err != nil {
		return fmt.Errorf("set %s up in %s: %w", e.Name, e.NS.Path(), err)
	}
	return nil
}

// Addresses of NewOutside's link: the host's end and the outside's.
const (
	OutsideHostAddr = "10.99.0.1"
	OutsideAddr     = "10.99.0.2"
)

// NewOutside makes an "outside" namespace (see NewNS) that hostNS reaches
// directly: veth "out0" in hostNS with OutsideHostAddr/24, "eth0" in the
// outside with OutsideAddr/24. The outside has no route back to anything
// else, so a reply reaches a container behind hostNS only if hostNS
// masqueraded it, and the source the outside sees (UDPSource) is the
// evidence of what hostNS did.
func NewOutside(hostNS *ns.NetNS) *ns.NetNS {
	ginkgo.GinkgoHelper()
	outside := NewNS()
	gomega.Expect(ConnectNS(
		VethEnd{NS: hostNS, Name: "out0", Addrs: []string{OutsideHostAddr + "/24"}},
		VethEnd{NS: outside, Name: "eth0", Addrs: []string{OutsideAddr + "/24"}},
	)).To(gomega.Succeed())
	return outside
}

// UDPSource sends UDP from inside from to dst (an address of to, either
// family) and returns the source address a socket inside to received it
// from: the container's own address, or the one a masquerade rewrote it to.
func UDPSource(from, to *ns.NetNS, dst string) (string, error) {
	return UDPDeliver(from, to, dst, dst, 10*time.Second)
}

// UDPDeliver listens inside to on listen (an address of to), sends UDP from
// inside from to send:<the listener's port> (listen itself, or an address
// the network rewrites to it, such as a DNAT'd service address), and
// returns the source address the listener saw. It sends a datagram every
// 200 ms until one arrives (the first may wait for neighbour resolution,
// which can fail once while links come up), and waits at most wait
// for one: the bound turns a lost datagram into an error instead of a hang
// (or, for a caller expecting none, into the evidence); it asserts no timing.
func UDPDeliver(from, to *ns.NetNS, listen, send string, wait time.Duration) (string, error) {
	lip, sip := net.ParseIP(listen), net.ParseIP(send)
	if lip == nil || sip == nil {
		return "", fmt.Errorf("%q or %q is not an IP address", listen, send)
	}
	var conn *net.UDPConn
	if err := to.Do(func() (err error) {
		// The socket belongs to `to` for its life, wherever it is read.
		conn, err = net.ListenUDP("udp", &net.UDPAddr{IP: lip})
		return err
	}); err != nil {
		return "", fmt.Errorf("listen on %s in %s: %w", listen, to.Path(), err)
	}
	defer conn.Close()
	port := conn.LocalAddr().(*net.UDPAddr).Port
	var c *net.UDPConn
	if err := from.Do(func() (err error) {
		// Like the listener, the sender's socket stays in from.
		c, err = net.DialUDP("udp", nil, &net.UDPAddr{IP: sip, Port: port})
		return err
	}); err != nil {
		return "", fmt.Errorf("send to %s from %s: %w", send, from.Path(), err)
	}
	defer c.Close()
	// Send until one arrives: a datagram can wait for neighbour resolution,
	// and one that fails (a solicitation sent while the link was still
	// coming up) drops what it queued.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			_, _ = c.Write([]byte("who?")) // best effort: the read below reports a loss
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	if err := conn.SetReadDeadline(time.Now().Add(wait)); err != nil {
		return "", err
	}
	buf := make([]byte, 16)
	_, src, err := conn.ReadFromUDP(buf)
	if err != nil {
		return "", fmt.Errorf("receive on %s in %s (sent to %s): %w", listen, to.Path(), send, err)
	}
	return src.IP.String(), nil
}
