package ip

import (
	"fmt"

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

// Reannounce makes the kernel announce link's addresses once more: it sets
// the link's MAC to the one it has, and the kernel treats that as a MAC
// change. With arp_notify set that is a gratuitous ARP for every IPv4
// address (and with ndisc_notify an unsolicited neighbour advertisement
// for every IPv6 one). It is for a link that came up before it had its
// addresses; unlike a gratuitous ARP sent by hand (pkg/link) it opens no
// packet socket, whose close waits out an RCU grace period (about 10 ms).
// The link's MAC assignment type reads "set" afterwards. h must be bound to link's namespace.
func Reannounce(h *netlink.Handle, link netlink.Link) error {
	if err := h.LinkSetHardwareAddr(link, link.Attrs().HardwareAddr); err != nil {
		return fmt.Errorf("announce %q: %w", link.Attrs().Name, err)
	}
	return nil
}
