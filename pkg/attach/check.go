package attach

import (
	"fmt"
	"net"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/result"
)

// The CHECK kit: read-only comparisons of a namespace with what ADD
// reported. Each error names the link and the namespace.

// CheckLink returns the link name in n (handle h) and checks that it is of
// kind ("veth", "bridge", ...; "" for any) and up when up is set.
func CheckLink(n *ns.NetNS, h *netlink.Handle, name, kind string, up bool) (netlink.Link, error) {
	l, err := ip.LinkByName(h, name)
	if err != nil {
		return nil, fmt.Errorf("in %s: %w", n.Path(), err)
	}
	if kind != "" && l.Type() != kind {
		return nil, fmt.Errorf("%q in %s is a %s, not a %s", name, n.Path(), l.Type(), kind)
	}
	if up && l.Attrs().Flags&net.FlagUp == 0 {
		return nil, fmt.Errorf("%q is down in %s", name, n.Path())
	}
	return l, nil
}

// CheckPeers checks that the veths a (in an) and b (in bn) are each
// other's peer.
func CheckPeers(an *ns.NetNS, a netlink.Link, bn *ns.NetNS, b netlink.Link) error {
	for _, p := range []struct {
		n           *ns.NetNS
		l, other    netlink.Link
		otherNSPath string
	}{{an, a, b, bn.Path()}, {bn, b, a, an.Path()}} {
		peer, err := ip.PeerIndex(nil, p.l)
		if err != nil {
			return fmt.Errorf("in %s: %w", p.n.Path(), err)
		}
		if peer != p.other.Attrs().Index {
			return fmt.Errorf("%q in %s is not the peer of %q in %s", p.l.Attrs().Name, p.n.Path(), p.other.Attrs().Name, p.otherNSPath)
		}
	}
	return nil
}

// CheckMaster checks that l is enslaved to master.
func CheckMaster(n *ns.NetNS, l, master netlink.Link) error {
	if l.Attrs().MasterIndex != master.Attrs().Index {
		return fmt.Errorf("%q in %s is not a port of %s %q", l.Attrs().Name, n.Path(), master.Type(), master.Attrs().Name)
	}
	return nil
}

// CheckMAC checks l's MAC against want (as a result reports it; "" passes).
func CheckMAC(n *ns.NetNS, l netlink.Link, want string) error {
	if want == "" {
		return nil
	}
	mac, err := net.ParseMAC(want)
	if err != nil {
		return fmt.Errorf("prevResult: MAC %q of %q: %w", want, l.Attrs().Name, err)
	}
	if have := l.Attrs().HardwareAddr.String(); !strings.EqualFold(have, mac.String()) {
		return fmt.Errorf("%q in %s has MAC %s, prevResult says %s", l.Attrs().Name, n.Path(), have, mac)
	}
	return nil
}

// CheckAddrs checks that l in n carries every address of want, each with
// its prefix length.
func CheckAddrs(n *ns.NetNS, h *netlink.Handle, l netlink.Link, want []*current.IPConfig) error {
	addrs, err := ip.AddrList(h, l, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("addresses of %q in %s: %w", l.Attrs().Name, n.Path(), err)
	}
	have := make([]net.IPNet, 0, len(addrs))
	for _, ad := range addrs {
		have = append(have, *ad.IPNet)
	}
	if err := result.CheckAddrs(l.Attrs().Name, want, have); err != nil {
		return fmt.Errorf("in %s: %w", n.Path(), err)
	}
	return nil
}

// CheckRoutes checks that the main table of n routes every route of want
// out of l (a route without a gateway matches any gateway).
func CheckRoutes(n *ns.NetNS, h *netlink.Handle, l netlink.Link, want []*types.Route) error {
	have, err := ip.RoutesOn(h, l)
	if err != nil {
		return fmt.Errorf("in %s: %w", n.Path(), err)
	}
	if err := result.CheckRoutes(l.Attrs().Name, want, have); err != nil {
		return fmt.Errorf("in %s: %w", n.Path(), err)
	}
	return nil
}

// CheckMasq checks the masquerade rules for ipcs when the config asks for
// them. The rules live in the plugin thread's namespace, the host's.
func (a *Attachment) CheckMasq(m *Masq, ipcs []*current.IPConfig) error {
	if !m.IPMasq || len(ipcs) == 0 {
		return nil
	}
	masq, err := netfilter.NewMasq(m.Backend())
	if err != nil {
		return err
	}
	if err := masq.Check(a.Owner(), Addrs(ipcs)); err != nil {
		return fmt.Errorf("masquerade (%s): %w", masq.Backend(), err)
	}
	return nil
}

// ContainerIface finds the container interface (CNI_IFNAME in CNI_NETNS)
// in prev and returns its index and the addresses pointing at it.
func (a *Attachment) ContainerIface(prev *current.Result) (int, []*current.IPConfig, error) {
	idx := result.InterfaceIndex(prev, a.Args.IfName, a.Args.Netns)
	if idx < 0 {
		return -1, nil, fmt.Errorf("prevResult lists no interface %q in sandbox %s", a.Args.IfName, a.Args.Netns)
	}
	return idx, result.IPsOf(prev, idx), nil
}
