package vrf

import (
	"errors"
	"fmt"
	"math"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/result"
)

func add(a *attach.Attachment, c *netConf) (types.Result, error) {
	contNS, h, unlock, err := a.ContainerLocked()
	if err != nil {
		return nil, err
	}
	defer unlock()
	where := "in " + contNS.Path()
	link, err := ip.LinkByName(h, a.Args.IfName)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}

	vrf, created, err := ensureVRF(h, c)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if created {
		a.Undo.Push("delete vrf "+c.VRFName, func() error { return deleteIfEmpty(h, c.VRFName) })
	}
	if err := a.Step(StepVRF); err != nil {
		return nil, err
	}

	// Enslaving flushes the interface's IPv6 addresses and its routes:
	// read them first, to put them back in the VRF (and, on rollback, in
	// the main table).
	addrs6, err := ip.AddrList(h, link, netlink.FAMILY_V6)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	// Every main-table route of the interface but the kernel's own (the
	// connected ones, which it remakes in the VRF's table): scope link
	// ones too, such as ptp's route to its gateway, without which the
	// routes through that gateway cannot be added (upstream keeps only
	// scope universe, and fails behind ptp).
	all, err := ip.RouteListFiltered(h, netlink.FAMILY_ALL,
		&netlink.Route{LinkIndex: link.Attrs().Index}, netlink.RT_FILTER_OIF)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	var routes []netlink.Route
	for _, r := range all {
		if r.Protocol != unix.RTPROT_KERNEL && r.Type == unix.RTN_UNICAST {
			routes = append(routes, r)
		}
	}
	m := link.Attrs().MasterIndex
	if m != 0 && m != vrf.Attrs().Index {
		return nil, fmt.Errorf("%q %s already has a master (#%d)", a.Args.IfName, where, m)
	}
	if err := h.LinkSetMasterByIndex(link, vrf.Attrs().Index); err != nil {
		return nil, fmt.Errorf("put %q into vrf %q %s: %w", a.Args.IfName, c.VRFName, where, err)
	}
	// An interface already in the vrf (an ADD over a live attachment) is
	// not released by the undo: that would flush the live attachment's
	// routes in the vrf's table.
	release := func() error {
		var errs []error
		if err := h.LinkSetNoMaster(link); err != nil {
			errs = append(errs, err)
		}
		errs = append(errs, readdAddrs(h, link, addrs6))
		for _, pass := range []bool{false, true} {
			for _, r := range routes {
				if (r.Gw != nil) == pass {
					errs = append(errs, ip.RouteAdd(h, &r))
				}
			}
		}
		return errors.Join(errs...)
	}
	if m == 0 {
		a.Undo.Push("release "+a.Args.IfName, release)
	}
	if err := a.Step(StepEnslave); err != nil {
		return nil, err
	}

	if err := readdAddrs(h, link, addrs6); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if err := a.Step(StepAddrs); err != nil {
		return nil, err
	}

	table := int(vrf.Table)
	// Routes through a gateway last: their gateway must be reachable in the
	// table, through the connected routes the kernel put there.
	for _, pass := range []bool{false, true} {
		for _, r := range routes {
			if (r.Gw != nil) != pass {
				continue
			}
			nr := r
			nr.Table = table
			nr.Flags = 0
			if err := ip.RouteAdd(h, &nr); err != nil {
				return nil, fmt.Errorf("vrf %q table %d %s: %w", c.VRFName, table, where, err)
			}
			a.Undo.Push("delete "+ip.RouteString(&nr), func() error { return ip.DelRoute(h, &nr) })
		}
	}
	if err := a.Step(StepRoutes); err != nil {
		return nil, err
	}
	return a.Prev, nil
}

// readdAddrs puts back the IPv6 addresses the kernel flushed, without
// duplicate address detection (they were the interface's already).
func readdAddrs(h *netlink.Handle, link netlink.Link, addrs []netlink.Addr) error {
	for _, ad := range addrs {
		if ad.IP.IsLinkLocalUnicast() {
			continue // the kernel makes a new one
		}
		// Without a prefix route when it had none (ptp's addresses): the
		// kernel would otherwise add one the main plugin never made.
		na := &netlink.Addr{IPNet: ad.IPNet, Flags: unix.IFA_F_NODAD | ad.Flags&unix.IFA_F_NOPREFIXROUTE, Scope: ad.Scope}
		if err := ip.AddrAdd(h, link, na); err != nil {
			return err
		}
	}
	return nil
}

// ensureVRF returns the VRF c names, creating it when missing (created
// true). An existing VRF with another table than c.Table, or a link of
// that name that is not a VRF, is code 7.
func ensureVRF(h *netlink.Handle, c *netConf) (*netlink.Vrf, bool, error) {
	l, err := ip.LinkByName(h, c.VRFName)
	if err == nil {
		vrf, ok := l.(*netlink.Vrf)
		if !ok {
			return nil, false, result.InvalidConfig(fmt.Errorf("vrfname: %q is a %s, not a vrf", c.VRFName, l.Type()))
		}
		if c.Table != 0 && vrf.Table != c.Table {
			return nil, false, result.InvalidConfig(fmt.Errorf("table: vrf %q exists with table %d, not %d", c.VRFName, vrf.Table, c.Table))
		}
		return vrf, false, nil
	}
	if !errors.Is(err, ip.ErrLinkNotFound) {
		return nil, false, err
	}
	table := c.Table
	if table == 0 {
		if table, err = freeTable(h); err != nil {
			return nil, false, err
		}
	}
	la := netlink.NewLinkAttrs()
	la.Name = c.VRFName
	if err := h.LinkAdd(&netlink.Vrf{LinkAttrs: la, Table: table}); err != nil {
		return nil, false, fmt.Errorf("add vrf %q table %d: %w", c.VRFName, table, err)
	}
	l, err = ip.LinkByName(h, c.VRFName)
	if err == nil {
		err = h.LinkSetUp(l)
	}
	if err != nil {
		_ = ip.DelLinkByName(h, c.VRFName) // best effort: the undo is not pushed yet
		return nil, false, fmt.Errorf("vrf %q: %w", c.VRFName, err)
	}
	vrf, ok := l.(*netlink.Vrf)
	if !ok {
		return nil, false, fmt.Errorf("vrf %q reads back as a %s", c.VRFName, l.Type())
	}
	return vrf, true, nil
}

// freeTable is the first table from 1 that no VRF uses and no rule or
// route is in.
func freeTable(h *netlink.Handle) (uint32, error) {
	tables, err := ip.UsedTables(h)
	if err != nil {
		return 0, err
	}
	used := map[uint32]bool{}
	for t := range tables {
		used[uint32(t)] = true
	}
	links, err := ip.LinkList(h)
	if err != nil {
		return 0, err
	}
	for _, l := range links {
		if v, ok := l.(*netlink.Vrf); ok {
			used[v.Table] = true
		}
	}
	for t := uint32(1); t < math.MaxUint32; t++ {
		if t >= 253 && t <= 255 {
			continue
		}
		if !used[t] {
			return t, nil
		}
	}
	return 0, result.TryAgainLater(errors.New("no free routing table"))
}

// deleteIfEmpty deletes the VRF when it has no member left; a VRF already
// gone is success.
func deleteIfEmpty(h *netlink.Handle, name string) error {
	l, err := ip.LinkByName(h, name)
	if errors.Is(err, ip.ErrLinkNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, ok := l.(*netlink.Vrf); !ok {
		return nil
	}
	return ip.DelMasterIfUnused(h, l)
}

// del releases the interface from the VRF and deletes the VRF when no
// member is left. Everything that is gone (namespace, VRF, interface) is
// success: with the lock, two DELs in one namespace run in turn, and the
// second finds the VRF gone (upstream #1282).
func del(a *attach.Attachment, c *netConf) []error {
	contNS, err := ns.OpenLocked(a.Args.Netns)
	if err != nil {
		return []error{err}
	}
	if contNS == nil {
		return nil // gone, and the VRF with it
	}
	defer contNS.Close()
	h := contNS.H
	where := "in " + contNS.Path()
	vrf, err := ip.LinkByName(h, c.VRFName)
	if errors.Is(err, ip.ErrLinkNotFound) {
		return nil
	}
	if err != nil {
		return []error{fmt.Errorf("%s: %w", where, err)}
	}
	if _, ok := vrf.(*netlink.Vrf); !ok {
		return nil // not a VRF: nothing of ours
	}
	var errs []error
	link, err := ip.LinkByName(h, a.Args.IfName)
	switch {
	case errors.Is(err, ip.ErrLinkNotFound):
	case err != nil:
		errs = append(errs, fmt.Errorf("%s: %w", where, err))
	case link.Attrs().MasterIndex == vrf.Attrs().Index:
		errs = append(errs, release(h, link, vrf.(*netlink.Vrf), where)...)
	}
	if err := deleteIfEmpty(h, c.VRFName); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", where, err))
	}
	return errs
}

// release takes link out of vrf and gives it back what ADD moved: leaving a
// VRF flushes the link's IPv6 addresses and its routes as entering did, so
// they are read from the VRF's table first and put back in the main table
// (connected routes first, then those through a gateway), and the
// interface is as the main plugin left it.
func release(h *netlink.Handle, link netlink.Link, vrf *netlink.Vrf, where string) []error {
	name := link.Attrs().Name
	addrs6, err := ip.AddrList(h, link, netlink.FAMILY_V6)
	if err != nil {
		return []error{fmt.Errorf("%s: %w", where, err)}
	}
	all, err := ip.RouteListFiltered(h, netlink.FAMILY_ALL,
		&netlink.Route{LinkIndex: link.Attrs().Index, Table: int(vrf.Table)}, netlink.RT_FILTER_OIF|netlink.RT_FILTER_TABLE)
	if err != nil {
		return []error{fmt.Errorf("%s: %w", where, err)}
	}
	if err := h.LinkSetNoMaster(link); err != nil {
		if errors.Is(err, unix.ENODEV) {
			return nil
		}
		return []error{fmt.Errorf("release %q from vrf %q %s: %w", name, vrf.Name, where, err)}
	}
	var errs []error
	if err := readdAddrs(h, link, addrs6); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", where, err))
	}
	for _, pass := range []bool{false, true} {
		for _, r := range all {
			if r.Protocol == unix.RTPROT_KERNEL || r.Type != unix.RTN_UNICAST || (r.Gw != nil) != pass {
				continue
			}
			nr := r
			nr.Table = unix.RT_TABLE_MAIN
			nr.Flags = 0
			if err := ip.RouteAdd(h, &nr); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
			}
		}
	}
	return errs
}

// check verifies the VRF, its table, the membership, the addresses and the
// routes prevResult reports.
func check(a *attach.Attachment, c *netConf, prev *current.Result) error {
	contNS, h, err := a.Container()
	if err != nil {
		return err
	}
	where := "in " + contNS.Path()
	l, err := ip.LinkByName(h, c.VRFName)
	if err != nil {
		return fmt.Errorf("vrf %s: %w", where, err)
	}
	vrf, ok := l.(*netlink.Vrf)
	if !ok {
		return fmt.Errorf("%q %s is a %s, not a vrf", c.VRFName, where, l.Type())
	}
	if c.Table != 0 && vrf.Table != c.Table {
		return fmt.Errorf("vrf %q %s has table %d, configured %d", c.VRFName, where, vrf.Table, c.Table)
	}
	link, err := ip.LinkByName(h, a.Args.IfName)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if link.Attrs().MasterIndex != vrf.Attrs().Index {
		return fmt.Errorf("%q %s is not in vrf %q", a.Args.IfName, where, c.VRFName)
	}
	_, ipcs, err := a.ContainerIface(prev)
	if err != nil {
		return err
	}
	if err := attach.CheckAddrs(contNS, h, link, ipcs); err != nil {
		return err
	}
	routes, err := ip.RouteListFiltered(h, netlink.FAMILY_ALL, &netlink.Route{Table: int(vrf.Table)}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return err
	}
	for _, want := range prev.Routes {
		found := false
		for _, r := range routes {
			if r.Dst != nil && r.Dst.String() == want.Dst.String() || r.Dst == nil && ip.IsDefault(&want.Dst) {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("vrf %q table %d %s has no route to %s", c.VRFName, vrf.Table, where, want.Dst.String())
		}
	}
	return nil
}
