package ptp

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ns"
)

// hostVethName derives the host end's name from the attachment rather than
// picking a random one, so DEL can find and remove a host end whose
// container namespace is no longer reachable by path (unmounted, but kept
// alive by a stray reference: the pair then outlives the DEL that would
// have removed it through the container end). 32 bits of hash can collide,
// so DEL deletes the link of that name only when it carries the
// attachment's alias (ip.AttachmentAlias).
func hostVethName(network, containerID, ifName string) string {
	sum := sha256.Sum256([]byte(network + "\x00" + containerID + "\x00" + ifName))
	return "veth" + hex.EncodeToString(sum[:4])
}

// setupVeth creates the pair, hostName in the host namespace (hostH),
// contIfName in contNS, tags both ends with alias so DEL deletes only its
// own links, and brings the host end up; the container end stays down until
// configureContainer. With ipv6 set, the host end skips
// duplicate-address detection (see disableDAD) before it comes up.
//
// The host end goes up first on purpose: the container end's coming up then
// turns the carrier on for both while neither qdisc is active yet, which
// the kernel's linkwatch treats as urgent. The other way round, the host
// end's operstate can wait up to a second in linkwatch when both ends have
// the same ifindex (common in a fresh namespace), and IPv6 holds its
// traffic until then.
func setupVeth(hostH, contH *netlink.Handle, contNS *ns.NetNS, hostName, contIfName, alias string, mtu int, ipv6 bool) (netlink.Link, error) {
	l, err := ip.SetupVeth(hostH, ip.VethOptions{
		ContIfName: contIfName,
		HostIfName: hostName,
		MTU:        mtu,
		ContNS:     int(contNS.Fd()),
	})
	if err != nil {
		return nil, fmt.Errorf("in %s: %w", contNS.Path(), err)
	}
	// The caller has no undo for the pair yet.
	if err := hostH.LinkSetAlias(l, alias); err != nil {
		_ = ip.DelLinkByName(hostH, hostName) // best effort: the error returned is what matters
		return nil, fmt.Errorf("set alias of %q: %w", hostName, err)
	}
	if err := setContainerAlias(contH, contIfName, alias); err != nil {
		_ = ip.DelLinkByName(hostH, hostName) // best effort: the error returned is what matters
		return nil, fmt.Errorf("in %s: %w", contNS.Path(), err)
	}
	if ipv6 {
		if err := disableDAD(hostName); err != nil {
			_ = ip.DelLinkByName(hostH, hostName) // best effort: the error returned is what matters
			return nil, err
		}
	}
	if err := hostH.LinkSetUp(l); err != nil {
		_ = ip.DelLinkByName(hostH, hostName) // best effort: the error returned is what matters
		return nil, fmt.Errorf("set %q up: %w", hostName, err)
	}
	return l, nil
}

func setContainerAlias(contH *netlink.Handle, ifName, alias string) error {
	l, err := ip.LinkByName(contH, ifName)
	if err != nil {
		return err
	}
	if err := contH.LinkSetAlias(l, alias); err != nil {
		return fmt.Errorf("set alias of %q: %w", ifName, err)
	}
	return nil
}

// disableDAD turns duplicate-address detection off on ifName, in the
// namespace of the calling thread, before the link comes up. IFA_F_NODAD
// covers the addresses ptp adds, but not the link-local address the kernel
// adds itself, and while that one is tentative the kernel sends no
// neighbour solicitation for traffic it forwards out of the link (it needs
// a usable link-local source): the host could not reach the container for
// 1-2 s. The link-local address derives from the veth's random MAC, on a
// link with one other end.
func disableDAD(ifName string) error {
	return ip.SetSysctl(fmt.Sprintf("net/ipv6/conf/%s/accept_dad", ifName), "0")
}

// operUpTimeout bounds the wait for both ends to be operationally up:
// linkwatch normally gets there within milliseconds, a second at worst.
const operUpTimeout = 5 * time.Second

// waitOperUp waits, on netlink events, until both ends are operationally up:
// until then the kernel may drop or hold their traffic, and ADD promises a
// usable attachment.
func waitOperUp(hostNS, contNS *ns.NetNS, hostIndex, contIndex int) error {
	if _, err := ip.WaitLink(int(hostNS.Fd()), hostIndex, ip.OperUp, operUpTimeout); err != nil {
		return fmt.Errorf("in %s: %w", hostNS.Path(), err)
	}
	if _, err := ip.WaitLink(int(contNS.Fd()), contIndex, ip.OperUp, operUpTimeout); err != nil {
		return fmt.Errorf("in %s: %w", contNS.Path(), err)
	}
	return nil
}
