package sbr

import (
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ns"
)

// del removes the rules from the interface's addresses (prevResult's,
// when the interface is gone) and, without "table", the interface's routes
// in their tables. A namespace that is gone took all of it along.
func del(a *attach.Attachment, c *netConf) []error {
	contNS, err := ns.OpenLocked(a.Args.Netns)
	if err != nil {
		return []error{err}
	}
	if contNS == nil {
		return nil // gone, and the rules and routes with it
	}
	defer contNS.Close()
	h := contNS.H

	var addrs []net.IP
	link, err := ip.LinkByName(h, a.Args.IfName)
	switch {
	case err == nil:
		list, err := ip.AddrList(h, link, netlink.FAMILY_ALL)
		if err != nil {
			return []error{fmt.Errorf("in %s: %w", contNS.Path(), err)}
		}
		for _, ad := range list {
			addrs = append(addrs, ad.IP)
		}
	case errors.Is(err, ip.ErrLinkNotFound):
		// The interface went first: prevResult, if it reads, still says
		// which rules were ours. DEL does not fail on one it cannot read.
		link = nil
		if prev, perr := a.Conf.Prev(); perr == nil && prev != nil {
			for _, ipc := range addrsOf(prev, a.Args.IfName) {
				addrs = append(addrs, ipc.Address.IP)
			}
		}
	default:
		return []error{fmt.Errorf("in %s: %w", contNS.Path(), err)}
	}

	var errs []error
	tables := map[int]bool{}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rules, err := h.RuleList(fam)
		if err != nil {
			errs = append(errs, fmt.Errorf("list rules in %s: %w", contNS.Path(), err))
			continue
		}
		for _, r := range rules {
			if !ownRule(r, addrs, c.Table) {
				continue
			}
			if err := ruleDel(h, &r); err != nil {
				errs = append(errs, fmt.Errorf("in %s: %w", contNS.Path(), err))
				continue
			}
			tables[r.Table] = true
		}
	}
	if c.Table != nil || link == nil {
		return errs
	}
	// The interface stays (sbr's own DEL in a list whose main plugin keeps
	// its attachment): what ADD moved out of the main table goes back
	// there, so the interface routes as it did before sbr (issue 14,
	// property test).
	prevDefault := prevDefaultRoutes(a)
	for t := range tables {
		routes, err := ip.RouteListFiltered(h, netlink.FAMILY_ALL, &netlink.Route{Table: t, LinkIndex: link.Attrs().Index},
			netlink.RT_FILTER_TABLE|netlink.RT_FILTER_OIF)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// Link routes before those through a gateway they make reachable.
		for _, pass := range []bool{false, true} {
			for _, r := range routes {
				if (r.Gw != nil) != pass {
					continue
				}
				if err := ip.DelRoute(h, &r); err != nil {
					errs = append(errs, fmt.Errorf("in %s: %w", contNS.Path(), err))
					continue
				}
				fam := r.Family
				if fam == 0 {
					fam = ip.Family(r.Gw)
				}
				if ip.IsDefault(r.Dst) && !prevDefault[fam] {
					continue // made by sbr's ADD, not moved from main
				}
				back := r
				back.Table, back.Flags = unix.RT_TABLE_MAIN, 0
				if err := addRoute(h, &back); err != nil && !errors.Is(err, unix.EEXIST) {
					errs = append(errs, fmt.Errorf("restore %s in %s: %w", ip.RouteString(&back), contNS.Path(), err))
				}
			}
		}
	}
	return errs
}

// prevDefaultRoutes says, per address family, whether prevResult gives the
// interface a default route: ADD moved that one from main; without one, the
// default route in sbr's table is sbr's own. An unreadable or absent
// prevResult gives none.
func prevDefaultRoutes(a *attach.Attachment) map[int]bool {
	out := map[int]bool{}
	prev, err := a.Conf.Prev()
	if err != nil || prev == nil {
		return out
	}
	for _, r := range prev.Routes {
		if ip.IsDefault(&r.Dst) {
			out[ip.Family(r.Dst.IP)] = true
		}
	}
	return out
}

// ownRule reports whether r is a source rule sbr would have made for one
// of addrs (into table, when set): from a single address, into a table
// other than the kernel's own.
func ownRule(r netlink.Rule, addrs []net.IP, table *int) bool {
	if r.Src == nil || r.Table == unix.RT_TABLE_MAIN || r.Table == unix.RT_TABLE_LOCAL || r.Table == unix.RT_TABLE_DEFAULT {
		return false
	}
	if ones, bits := r.Src.Mask.Size(); ones != bits {
		return false
	}
	if table != nil && r.Table != *table {
		return false
	}
	for _, a := range addrs {
		if r.Src.IP.Equal(a) {
			return true
		}
	}
	return false
}

func ruleDel(h *netlink.Handle, r *netlink.Rule) error {
	if err := h.RuleDel(r); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("delete rule from %s lookup %d: %w", r.Src, r.Table, err)
	}
	return nil
}
