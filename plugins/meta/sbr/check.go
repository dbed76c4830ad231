package sbr

import (
	"fmt"
	"net"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/result"
)

// check verifies, for every address prevResult gives the interface, the
// rule from it and (without "table") the table's subnet and default
// routes on the interface.
func check(a *attach.Attachment, c *netConf, prev *current.Result) error {
	ipcs := addrsOf(prev, a.Args.IfName)
	if len(ipcs) == 0 {
		return result.InvalidConfig(fmt.Errorf("prevResult: no address for interface %q", a.Args.IfName))
	}
	contNS, h, err := a.Container()
	if err != nil {
		return err
	}
	link, err := ip.LinkByName(h, a.Args.IfName)
	if err != nil {
		return fmt.Errorf("in %s: %w", contNS.Path(), err)
	}
	for _, ipc := range ipcs {
		addr := ipc.Address.IP
		rules, err := h.RuleList(ip.Family(addr))
		if err != nil {
			return fmt.Errorf("list rules in %s: %w", contNS.Path(), err)
		}
		table := -1
		for _, r := range rules {
			if ownRule(r, []net.IP{addr}, c.Table) {
				table = r.Table
				break
			}
		}
		if table < 0 {
			return fmt.Errorf("no rule from %s into a table of its own in %s", hostPrefix(addr), contNS.Path())
		}
		if c.Table != nil {
			continue
		}
		routes, err := ip.RouteListFiltered(h, ip.Family(addr), &netlink.Route{Table: table, LinkIndex: link.Attrs().Index},
			netlink.RT_FILTER_TABLE|netlink.RT_FILTER_OIF)
		if err != nil {
			return err
		}
		subnet := &net.IPNet{IP: addr.Mask(ipc.Address.Mask), Mask: ipc.Address.Mask}
		if !hasRoute(routes, subnet, nil) {
			return fmt.Errorf("table %d in %s has no route to %s on %q", table, contNS.Path(), subnet, a.Args.IfName)
		}
		if gw := c.gateway(addr, ipc.Gateway); gw != nil && !hasRoute(routes, defaultDst(addr), gw) {
			return fmt.Errorf("table %d in %s has no default route via %s on %q", table, contNS.Path(), gw, a.Args.IfName)
		}
	}
	return nil
}

func hasRoute(routes []netlink.Route, dst *net.IPNet, gw net.IP) bool {
	for _, r := range routes {
		d := r.Dst
		if d == nil {
			d = defaultDst(dst.IP)
		}
		if d.String() == dst.String() && (gw == nil || gw.Equal(r.Gw)) {
			return true
		}
	}
	return false
}
