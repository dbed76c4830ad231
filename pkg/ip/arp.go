package ip

import (
	"errors"
	"fmt"
	"net"

	"github.com/j-keck/arping"
	"github.com/vishvananda/netlink"
)

// SetArpNotify sets arp_notify on ifName, so the kernel itself sends a
// gratuitous ARP whenever the interface's carrier comes up or its MAC
// changes (a container restarted with the same address on a new veth is
// announced without waiting for neighbour caches to expire). It works in the
// network namespace of the calling thread.
func SetArpNotify(ifName string) error {
	return SetSysctl(fmt.Sprintf("net/ipv4/conf/%s/arp_notify", ifName), "1")
}

// AnnounceIPv4 sends one gratuitous ARP out of link for every IPv4 address in
// ips (IPv6 addresses are skipped: neighbour discovery announces those).
// Peers that cached the address with another MAC (an earlier container that
// had it) update their caches at once.
//
// The packet socket is opened in the network namespace of the calling
// thread, which must be the one holding link: call it inside ns.NetNS.Do.
// All addresses are tried; failures are joined.
func AnnounceIPv4(link netlink.Link, ips []net.IP) error {
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

// Reannounce makes the kernel announce link's addresses once more: it sets
// the link's MAC to the one it has, and the kernel treats that as a MAC
// change. With arp_notify set that is a gratuitous ARP for every IPv4
// address (and with ndisc_notify an unsolicited neighbour advertisement
// for every IPv6 one). It is for a link that came up before it had its
// addresses; unlike AnnounceIPv4 it opens no packet socket, whose close
// waits out an RCU grace period (about 10 ms). The link's MAC assignment
// type reads "set" afterwards. h must be bound to link's namespace.
func Reannounce(h *netlink.Handle, link netlink.Link) error {
	if err := h.LinkSetHardwareAddr(link, link.Attrs().HardwareAddr); err != nil {
		return fmt.Errorf("announce %q: %w", link.Attrs().Name, err)
	}
	return nil
}
