package link

import (
	"errors"
	"fmt"
	"net"

	"github.com/j-keck/arping"
	"github.com/vishvananda/netlink"
)

// announceIPv4 sends one gratuitous ARP out of link for every IPv4 address in
// ips (IPv6 addresses are skipped: neighbour discovery announces those).
// Peers that cached the address with another MAC (an earlier container that
// had it) update their caches at once.
//
// The packet socket is opened in the network namespace of the calling
// thread, which must be the one holding link: call it inside ns.NetNS.Do.
// All addresses are tried; failures are joined. It lives beside its one
// caller (Finish) rather than in pkg/ip, which every plugin links: only the
// link plugins send an ARP by hand, so only they link the arping package.
func announceIPv4(link netlink.Link, ips []net.IP) error {
	a := link.Attrs()
	iface := net.Interface{
		Index:        a.Index,
		MTU:          a.MTU,
		Name:         a.Name,
		HardwareAddr: a.HardwareAddr,
		Flags:        a.Flags,
	}
	var errs []error
	for _, addr := range ips {
		if addr.To4() == nil {
			continue
		}
		if err := arping.GratuitousArpOverIface(addr.To4(), iface); err != nil {
			errs = append(errs, fmt.Errorf("gratuitous arp for %s on %q: %w", addr, a.Name, err))
		}
	}
	return errors.Join(errs...)
}
