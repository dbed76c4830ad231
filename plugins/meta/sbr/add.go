package sbr

import (
	"errors"
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/result"
)

func add(a *attach.Attachment, c *netConf) (types.Result, error) {
	ipcs := addrsOf(a.Prev, a.Args.IfName)
	if len(ipcs) == 0 {
		return nil, result.InvalidConfig(fmt.Errorf("prevResult: no address for interface %q", a.Args.IfName))
	}
	contNS, h, unlock, err := a.ContainerLocked()
	if err != nil {
		return nil, err
	}
	defer unlock()
	link, err := ip.LinkByName(h, a.Args.IfName)
	if err != nil {
		return nil, fmt.Errorf("in %s: %w", contNS.Path(), err)
	}
	where := fmt.Sprintf("in %s", contNS.Path())

	table := 0
	if c.Table != nil {
		table = *c.Table
	} else if table, err = freeTable(h); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	a.Log.Debug("using table", "table", table)

	for _, ipc := range ipcs {
		rule := sourceRule(ipc.Address.IP, table)
		if err := h.RuleAdd(rule); err != nil {
			return nil, fmt.Errorf("add rule from %s lookup %d %s: %w", rule.Src, table, where, err)
		}
		a.Undo.Push(fmt.Sprintf("delete rule from %s", rule.Src), func() error { return ruleDel(h, rule) })
	}
	if err := a.Step(StepRules); err != nil {
		return nil, err
	}

	if c.Table == nil {
		if err := moveRoutes(a, h, link, table); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		for _, ipc := range ipcs {
			gw := c.gateway(ipc.Address.IP, ipc.Gateway)
			if gw == nil {
				continue
			}
			r := &netlink.Route{Dst: defaultDst(ipc.Address.IP), Gw: gw, Table: table, LinkIndex: link.Attrs().Index}
			err := addRoute(h, r)
			if errors.Is(err, unix.EEXIST) {
				continue // moved from main already
			}
			if err != nil {
				return nil, fmt.Errorf("add default route via %s table %d %s: %w", gw, table, where, err)
			}
			a.Undo.Push("delete "+ip.RouteString(r), func() error { return ip.DelRoute(h, r) })
		}
	}
	if err := a.Step(StepRoutes); err != nil {
		return nil, err
	}

	if c.AddSourceHints {
		hintTable := table
		if c.Table != nil {
			hintTable = unix.RT_TABLE_MAIN
		}
		if err := addHints(a, h, link, hintTable, ipcs); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
	}
	if err := a.Step(StepHints); err != nil {
		return nil, err
	}
	return a.Prev, nil
}

// addrsOf returns the addresses prevResult gives ifName: those pointing at
// an interface of that name, and those pointing at none (0.2.0 results,
// and upstream's reading).
func addrsOf(res *current.Result, ifName string) []*current.IPConfig {
	var out []*current.IPConfig
	for _, ipc := range res.IPs {
		if ipc.Interface != nil {
			i := *ipc.Interface
			if i >= 0 && i < len(res.Interfaces) && res.Interfaces[i].Name != ifName {
				continue
			}
		}
		out = append(out, ipc)
	}
	return out
}

func hostPrefix(addr net.IP) *net.IPNet {
	if a4 := addr.To4(); a4 != nil {
		return &net.IPNet{IP: a4, Mask: net.CIDRMask(32, 32)}
	}
	return &net.IPNet{IP: addr, Mask: net.CIDRMask(128, 128)}
}

func defaultDst(addr net.IP) *net.IPNet {
	if addr.To4() != nil {
		return &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}
	}
	return &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
}

func sourceRule(addr net.IP, table int) *netlink.Rule {
	r := netlink.NewRule()
	r.Src = hostPrefix(addr)
	r.Table = table
	r.Family = ip.Family(addr)
	return r
}

// freeTable is the first table from FirstTable up that no rule points at
// and no route (of either family) is in.
func freeTable(h *netlink.Handle) (int, error) {
	used, err := ip.UsedTables(h)
	if err != nil {
		return 0, err
	}
	for t := FirstTable; t <= lastTable; t++ {
		if !used[t] {
			return t, nil
		}
	}
	return 0, result.TryAgainLater(fmt.Errorf("no free routing table in %d-%d", FirstTable, lastTable))
}

// moveRoutes moves the link's main-table routes into table: each is added
// there first, then deleted from main, so that a failure between the two
// loses no route. Flags are cleared: a route the kernel made carries flags
// that a new route may not. Routes are added, never replaced: an IPv6
// replace takes the first route of the same prefix, another link's too.
func moveRoutes(a *attach.Attachment, h *netlink.Handle, link netlink.Link, table int) error {
	routes, err := ip.RouteList(h, link, netlink.FAMILY_ALL)
	if err != nil {
		return err
	}
	var added, removed []netlink.Route
	// One undo for the lot, in the order the kernel accepts: the main
	// table's link routes before those through a gateway they make
	// reachable, then the table emptied.
	a.Undo.Push("move routes back to main", func() error {
		var errs []error
		for _, pass := range []bool{false, true} {
			for _, r := range removed {
				if (r.Gw != nil) == pass {
					back := r
					back.Flags = 0
					if err := addRoute(h, &back); err != nil && !errors.Is(err, unix.EEXIST) {
						errs = append(errs, fmt.Errorf("restore %s: %w", ip.RouteString(&back), err))
					}
				}
			}
		}
		for _, r := range added {
			errs = append(errs, ip.DelRoute(h, &r))
		}
		return errors.Join(errs...)
	})
	for _, r := range routes {
		moved := r
		moved.Table = table
		moved.Flags = 0
		if err := addRoute(h, &moved); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("move %s to table %d: %w", ip.RouteString(&r), table, err)
		} else if err == nil {
			added = append(added, moved)
		}
		if err := ip.DelRoute(h, &r); err != nil {
			return fmt.Errorf("move %s to table %d: %w", ip.RouteString(&r), table, err)
		}
		removed = append(removed, r)
	}
	return nil
}

// addRoute adds r. An IPv6 route is appended: IPv6 refuses an exclusive
// add next to a route of the same prefix and metric on another link (two
// interfaces' fe80::/64), and a replace would take that route's place.
func addRoute(h *netlink.Handle, r *netlink.Route) error {
	if r.Dst != nil && r.Dst.IP.To4() == nil || r.Gw != nil && r.Gw.To4() == nil {
		return h.RouteAppend(r)
	}
	return h.RouteAdd(r)
}

// addHints sets each address as the preferred source of the link's route
// to its subnet in table.
func addHints(a *attach.Attachment, h *netlink.Handle, link netlink.Link, table int, ipcs []*current.IPConfig) error {
	for _, ipc := range ipcs {
		subnet := &net.IPNet{IP: ipc.Address.IP.Mask(ipc.Address.Mask), Mask: ipc.Address.Mask}
		routes, err := ip.RouteListFiltered(h, ip.Family(ipc.Address.IP),
			&netlink.Route{Table: table, LinkIndex: link.Attrs().Index, Dst: subnet},
			netlink.RT_FILTER_TABLE|netlink.RT_FILTER_OIF|netlink.RT_FILTER_DST)
		if err != nil {
			return err
		}
		for _, r := range routes {
			old := r
			hinted := r
			hinted.Src = ipc.Address.IP
			hinted.Flags = 0
			if err := h.RouteReplace(&hinted); err != nil {
				return fmt.Errorf("source hint %s on %s: %w", ipc.Address.IP, ip.RouteString(&old), err)
			}
			a.Undo.Push("unhint "+ip.RouteString(&old), func() error {
				back := old
				back.Flags = 0
				return h.RouteReplace(&back)
			})
		}
	}
	return nil
}
