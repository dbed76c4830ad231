package attach

import (
	"fmt"
	"net"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/ip"
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

// CheckRoutes checks that n routes every route of want out of l (a route
// without a gateway matches any gateway): from its main table or, for a
// route the main table lacks, from a table that a policy rule selecting
// one of l's addresses as source looks up. sbr, later in a chain, moves
// the interface's routes into such a table ("from <address> lookup
// <table>"); traffic from the interface still finds them there, so the
// main plugin's CHECK does too (issue 22), while a route in no table that
// traffic from the interface consults is missing.
func CheckRoutes(n *ns.NetNS, h *netlink.Handle, l netlink.Link, want []*types.Route) error {
	have, err := ip.RoutesOn(h, l)
	if err != nil {
		return fmt.Errorf("in %s: %w", n.Path(), err)
	}
	if result.CheckRoutes(l.Attrs().Name, want, have) == nil {
		return nil
	}
	tables, err := sourceTables(h, l)
	if err != nil {
		return fmt.Errorf("in %s: %w", n.Path(), err)
	}
	for _, t := range tables {
		more, err := ip.RoutesOnInTable(h, l, t)
		if err != nil {
			return fmt.Errorf("in %s: %w", n.Path(), err)
		}
		have = append(have, more...)
	}
	if err := result.CheckRoutes(l.Attrs().Name, want, have); err != nil {
		return fmt.Errorf("in %s: %w", n.Path(), err)
	}
	return nil
}

// sourceTables lists the tables, other than main and local, that a policy
// rule looks up for traffic from one of l's addresses: a lookup rule whose
// only selector is a source prefix holding the address, or none at all.
// A rule that also selects on mark, interface, destination, TOS, ports,
// protocol or uid, or an inverted one, does not apply to all that traffic
// and is passed over.
func sourceTables(h *netlink.Handle, l netlink.Link) ([]int, error) {
	addrs, err := ip.AddrList(h, l, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("addresses of %q: %w", l.Attrs().Name, err)
	}
	rules, err := ip.RetryDump("list rules", func() ([]netlink.Rule, error) { return h.RuleList(netlink.FAMILY_ALL) })
	if err != nil {
		return nil, err
	}
	seen := map[int]bool{}
	var out []int
	for _, r := range rules {
		if r.Table == 0 || r.Table == unix.RT_TABLE_MAIN || r.Table == unix.RT_TABLE_LOCAL || seen[r.Table] {
			continue
		}
		if r.Invert || r.Dst != nil || r.Mark != 0 || r.Mask != nil || r.Tos != 0 || r.IifName != "" || r.OifName != "" ||
			r.Goto >= 0 || r.Dport != nil || r.Sport != nil || r.IPProto != 0 || r.UIDRange != nil {
			continue
		}
		for _, a := range addrs {
			if ip.Family(a.IP) == r.Family && (r.Src == nil || r.Src.Contains(a.IP)) {
				seen[r.Table] = true
				out = append(out, r.Table)
				break
			}
		}
	}
	return out, nil
}

// CheckTarget is what a CHECK compares in the container: the container
// namespace with a handle bound to it, and prevResult's interface
// CNI_IFNAME in CNI_NETNS with the addresses pointing at it.
type CheckTarget struct {
	NS    *ns.NetNS
	H     *netlink.Handle
	Iface *current.Interface
	IPs   []*current.IPConfig
}

// CheckTarget finds the container interface in prev (ContainerIface) and
// returns it with the container namespace (opened by the runner already).
func (a *Attachment) CheckTarget(prev *current.Result) (*CheckTarget, error) {
	idx, ipcs, err := a.ContainerIface(prev)
	if err != nil {
		return nil, err
	}
	n, h, err := a.Container()
	if err != nil {
		return nil, err
	}
	return &CheckTarget{NS: n, H: h, Iface: prev.Interfaces[idx], IPs: ipcs}, nil
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
