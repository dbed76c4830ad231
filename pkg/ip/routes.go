package ip

import (
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/result"
)

// RoutesOn returns the main-table routes of link in h's namespace in the
// form result.CheckRoutes compares, a default route as 0.0.0.0/0 or ::/0.
func RoutesOn(h *netlink.Handle, link netlink.Link) ([]result.Route, error) {
	routes, err := RouteList(h, link, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("routes of %q: %w", link.Attrs().Name, err)
	}
	return checkRoutes(routes), nil
}

// RoutesOnInTable is RoutesOn for routing table table.
func RoutesOnInTable(h *netlink.Handle, link netlink.Link, table int) ([]result.Route, error) {
	routes, err := RouteListFiltered(h, netlink.FAMILY_ALL, &netlink.Route{Table: table, LinkIndex: link.Attrs().Index},
		netlink.RT_FILTER_TABLE|netlink.RT_FILTER_OIF)
	if err != nil {
		return nil, fmt.Errorf("routes of %q in table %d: %w", link.Attrs().Name, table, err)
	}
	return checkRoutes(routes), nil
}

func checkRoutes(routes []netlink.Route) []result.Route {
	out := make([]result.Route, 0, len(routes))
	for _, r := range routes {
		rr := result.Route{GW: r.Gw}
		switch {
		case r.Dst != nil:
			rr.Dst = *r.Dst
		case r.Family == netlink.FAMILY_V6:
			rr.Dst = net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
		default:
			rr.Dst = net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}
		}
		out = append(out, rr)
	}
	return out
}

// DelRoute deletes r through h (in h's namespace). A route, table or device
// that is already gone is success, as DEL needs.
func DelRoute(h *netlink.Handle, r *netlink.Route) error {
	if err := h.RouteDel(r); err != nil && !errors.Is(err, unix.ESRCH) && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("delete %s: %w", RouteString(r), err)
	}
	return nil
}

// UsedTables returns the routing tables that a rule (of either family)
// points at or a route (of either family) is in, in h's namespace: what a
// plugin picking a table of its own (sbr, vrf) must not take.
func UsedTables(h *netlink.Handle) (map[int]bool, error) {
	used := map[int]bool{}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rules, err := h.RuleList(fam)
		if err != nil {
			return nil, fmt.Errorf("list rules: %w", err)
		}
		for _, r := range rules {
			used[r.Table] = true
		}
		routes, err := RouteListFiltered(h, fam, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return nil, err
		}
		for _, r := range routes {
			used[r.Table] = true
		}
	}
	return used, nil
}

// IsDefault reports whether dst is a default destination (0.0.0.0/0,
// ::/0), nil included: netlink reads a default route's Dst back as nil.
func IsDefault(dst *net.IPNet) bool {
	if dst == nil {
		return true
	}
	ones, _ := dst.Mask.Size()
	return ones == 0
}
