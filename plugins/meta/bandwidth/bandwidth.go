package bandwidth

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/result"
)

var (
	rootHandle    = netlink.MakeHandle(1, 0)
	ingressHandle = netlink.MakeHandle(0xffff, 0)
)

// plan is what ADD will make, resolved before any change.
type plan struct {
	host            netlink.Link // the host end of the container's veth
	ingress, egress *tbfParams   // nil: no limit that way
	// what upstream's ADD installs for the same limits (CHECK accepts it)
	upIngress, upEgress tbfParams
	ifbName, ifAlias    string
	clamped             []clamp // bursts cut to what tbf can hold
}

func add(a *attach.Attachment, c *netConf) (types.Result, error) {
	res := a.Prev
	if c.bw.isZero() {
		return res, nil
	}
	p, err := resolve(a, c, res)
	if err != nil {
		return nil, err
	}
	for _, cl := range p.clamped {
		a.Log.Warn("burst clamped to the largest tbf can hold at the rate", "key", cl.key,
			"bits", cl.asked, "rate", cl.rate, "installed", cl.installed)
	}
	hostNS, h, err := a.Host()
	if err != nil {
		return nil, err
	}
	hostName := p.host.Attrs().Name

	if p.ingress != nil {
		where := fmt.Sprintf("%q (the host end of %q in %s)", hostName, a.Args.IfName, a.Args.Netns)
		undo, err := ensureRootTbf(h, p.host, *p.ingress, p.upIngress, where)
		if err != nil {
			return nil, err
		}
		if undo != nil {
			a.Undo.Push("undo the tbf of "+hostName, undo)
		}
	}
	if err := a.Step(StepIngress); err != nil {
		return nil, err
	}
	if p.egress == nil {
		return res, nil
	}

	ifb, made, err := ensureIfb(h, p.ifbName, p.ifAlias, IfbGroup(c.Name), p.host.Attrs().MTU)
	if err != nil {
		return nil, err
	}
	if made {
		a.Undo.Push("delete ifb "+p.ifbName, func() error { return ip.DelLinkByName(h, p.ifbName) })
	}
	if err := a.Step(StepIfb); err != nil {
		return nil, err
	}

	if err := ensureRedirect(a, h, p.host, ifb); err != nil {
		return nil, err
	}
	if err := a.Step(StepRedirect); err != nil {
		return nil, err
	}

	undo, err := ensureRootTbf(h, ifb, *p.egress, p.upEgress, fmt.Sprintf("%q in %s", p.ifbName, hostNS.Path()))
	if err != nil {
		return nil, err
	}
	if undo != nil {
		a.Undo.Push("undo the tbf of "+p.ifbName, undo)
	}
	if err := a.Step(StepEgress); err != nil {
		return nil, err
	}
	res.Interfaces = append(res.Interfaces, &current.Interface{Name: p.ifbName, Mac: ifb.Attrs().HardwareAddr.String()})
	return res, nil
}

// resolve finds the host end and computes the tbf parameters, changing
// nothing. A burst tbf cannot hold is clamped (tbfFor); ADD logs it.
func resolve(a *attach.Attachment, c *netConf, res *current.Result) (*plan, error) {
	p := &plan{ifbName: IfbName(c.Name, a.Args.ContainerID), ifAlias: ifbAlias(c.Name, a.Args.ContainerID)}
	tick := netlink.TickInUsec()
	for _, d := range []struct {
		dir         string
		rate, burst uint64
		to          **tbfParams
		up          *tbfParams
	}{
		{"ingress", c.bw.IngressRate, c.bw.IngressBurst, &p.ingress, &p.upIngress},
		{"egress", c.bw.EgressRate, c.bw.EgressBurst, &p.egress, &p.upEgress},
	} {
		if d.rate == 0 {
			continue
		}
		t, burst, clamped := tbfFor(d.rate, d.burst, tick)
		*d.to = &t
		*d.up = upstreamTbf(d.rate, d.burst, tick)
		if clamped {
			p.clamped = append(p.clamped, clamp{key: prefix(c) + d.dir + "Burst", asked: d.burst, rate: d.rate, installed: burst})
		}
	}
	host, err := hostEnd(a, res)
	if err != nil {
		return nil, err
	}
	p.host = host
	return p, nil
}

// clamp is a burst tbf cannot hold at its rate, and the one installed.
type clamp struct {
	key                    string
	asked, rate, installed uint64
}

func prefix(c *netConf) string {
	if c.bw == c.RuntimeConfig.Bandwidth {
		return "runtimeConfig.bandwidth."
	}
	return ""
}

// hostEnd is the host end of CNI_IFNAME's veth: its peer, which res must
// list as a host interface (upstream's rule). An interface that is not a
// veth (macvlan, ipvlan) has no host end to shape: code 7.
func hostEnd(a *attach.Attachment, res *current.Result) (netlink.Link, error) {
	contNS, contH, err := a.Container()
	if err != nil {
		return nil, err
	}
	cl, err := ip.LinkByName(contH, a.Args.IfName)
	if err != nil {
		return nil, fmt.Errorf("in %s: %w", contNS.Path(), err)
	}
	if cl.Type() != "veth" {
		return nil, result.InvalidConfig(fmt.Errorf("interface %q in %s is a %s, not a veth: bandwidth shapes the host end of a veth pair", a.Args.IfName, contNS.Path(), cl.Type()))
	}
	peer, err := ip.PeerIndex(contH, cl)
	if err != nil {
		return nil, fmt.Errorf("peer of %q in %s: %w", a.Args.IfName, contNS.Path(), err)
	}
	hostNS, h, err := a.Host()
	if err != nil {
		return nil, err
	}
	hl, err := h.LinkByIndex(peer)
	if err != nil {
		return nil, fmt.Errorf("peer #%d of %q is not in %s: %w", peer, a.Args.IfName, hostNS.Path(), err)
	}
	if result.InterfaceIndex(res, hl.Attrs().Name, "") < 0 {
		return nil, result.InvalidConfig(fmt.Errorf("prevResult lists no host interface %q (the peer of %q)", hl.Attrs().Name, a.Args.IfName))
	}
	return hl, nil
}

func tbf(index int, t tbfParams) *netlink.Tbf {
	return &netlink.Tbf{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: index, Handle: rootHandle, Parent: netlink.HANDLE_ROOT},
		Rate:       t.Rate, Buffer: t.Buffer, Limit: t.Limit,
	}
}

// ensureRootTbf makes a tbf with want the root qdisc of l (described in
// errors as where) and returns how to undo what it changed (nil: nothing). The
// root slot is taken only when it is free (the kernel's default qdisc,
// handle 0:) or bandwidth's own: a tbf 1: (ADD's, upstream's, or one a DEL
// without prevResult left, issue 22). One with want, or with what
// upstream's ADD installs for the same limits, stays as it is, so an ADD
// over a live attachment (check --repair) leaves no moment unshaped; one
// with other parameters is changed in place, and the undo puts them back.
// Any other root qdisc is another tool's: it is refused and left as it is
// (upstream's ADD fails on it too, "file exists"; issue 29).
func ensureRootTbf(h *netlink.Handle, l netlink.Link, want, upstream tbfParams, where string) (undo func() error, err error) {
	root, err := rootQdisc(h, l)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	q := tbf(l.Attrs().Index, want)
	if root == nil {
		// Add, not replace: a qdisc another tool put there meanwhile
		// makes it fail instead of being replaced.
		if err := h.QdiscAdd(q); err != nil {
			return nil, fmt.Errorf("add tbf to %s: %w", where, err)
		}
		return func() error { return qdiscDel(h, q) }, nil
	}
	if !ownRoot(root) {
		return nil, fmt.Errorf("%s has another tool's root qdisc (%s %x:): bandwidth puts its tbf at the root and replaces no other qdisc there",
			where, root.Type(), root.Attrs().Handle>>16)
	}
	t := root.(*netlink.Tbf)
	got := tbfParams{Rate: t.Rate, Buffer: t.Buffer, Limit: t.Limit}
	if got == want || got == upstream {
		return nil, nil
	}
	if err := h.QdiscReplace(q); err != nil {
		return nil, fmt.Errorf("change the tbf of %s: %w", where, err)
	}
	was := tbf(l.Attrs().Index, got)
	return func() error { return h.QdiscReplace(was) }, nil
}

// rootQdisc is l's root qdisc, or nil when that is the kernel's default
// (handle 0: noqueue, pfifo_fast, mq...), which any qdisc may take the
// place of.
func rootQdisc(h *netlink.Handle, l netlink.Link) (netlink.Qdisc, error) {
	qs, err := h.QdiscList(l)
	if err != nil {
		return nil, fmt.Errorf("qdiscs of %q: %w", l.Attrs().Name, err)
	}
	for _, q := range qs {
		if q.Attrs().Parent == netlink.HANDLE_ROOT && q.Attrs().Handle != 0 {
			return q, nil
		}
	}
	return nil, nil
}

// ownRoot reports whether q is a root qdisc bandwidth made (ours or
// upstream's): a tbf with handle 1:. ADD changes only such a root, DEL
// deletes only such a root.
func ownRoot(q netlink.Qdisc) bool {
	_, isTbf := q.(*netlink.Tbf)
	return isTbf && q.Attrs().Handle == rootHandle && q.Attrs().Parent == netlink.HANDLE_ROOT
}

// redirectPrio is the priority of the redirect on the host end's ingress
// hook: the last one, so that the filters another tool (an eBPF agent) has
// on the same hook run first and their verdict stands (issue 23). Upstream
// uses 1, the priority such tools take; a filter of another kind there
// would make either theirs or ours fail.
const redirectPrio = 0xffff

// ingressHook is the parent of filters on a link's ingress hook, the same
// for an ingress qdisc and a clsact.
var ingressHook = uint32(netlink.HANDLE_MIN_INGRESS)

func redirect(hostIndex, ifbIndex int) *netlink.U32 {
	return &netlink.U32{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: hostIndex, Parent: ingressHook, Priority: redirectPrio, Protocol: unix.ETH_P_ALL},
		ClassId:     netlink.MakeHandle(1, 1),
		RedirIndex:  ifbIndex,
	}
}

// ensureRedirect sends what the container sends (the host end's ingress)
// to the ifb: a u32 filter matching everything, with a mirred egress
// redirect, on the ingress hook. The hook's qdisc (ffff:) may be there
// already: another tool's clsact, or the ingress qdisc of an earlier ADD.
// It is reused, never replaced; only when there is none is a clsact made
// (not upstream's ingress qdisc: a tool that comes later can share a
// clsact, and cannot turn an ingress qdisc into one). A redirect to this
// ifb already there (an earlier ADD's, ours or upstream's) stays, so an
// ADD over a live attachment changes nothing; other redirects bandwidth
// left on the hook (to an ifb that is gone) are removed first: they would
// drop the traffic.
func ensureRedirect(a *attach.Attachment, h *netlink.Handle, host, ifb netlink.Link) error {
	hostName, to := host.Attrs().Name, ifb.Attrs().Index
	made, err := ensureIngressHook(h, host)
	if err != nil {
		return fmt.Errorf("clsact qdisc on %q: %w", hostName, err)
	}
	if made {
		a.Undo.Push("delete clsact qdisc of "+hostName, func() error { return deleteIngressHookIfUnused(h, host) })
	}
	fs, err := bandwidthRedirects(h, host)
	if err != nil {
		return err
	}
	var stale []netlink.Filter
	there := false
	for _, f := range fs {
		if t, _ := redirectTarget(f); t == to {
			there = true
		} else {
			stale = append(stale, f)
		}
	}
	if err := deleteFilters(h, host, stale); err != nil {
		return err
	}
	if there {
		return nil
	}
	f := redirect(host.Attrs().Index, to)
	if err := h.FilterAdd(f); err != nil {
		return fmt.Errorf("redirect the ingress of %q to %q (u32, mirred): %w", hostName, ifb.Attrs().Name, err)
	}
	a.Undo.Push("delete redirect of "+hostName, func() error {
		fs, err := bandwidthRedirects(h, host)
		if err != nil {
			return err
		}
		var mine []netlink.Filter
		for _, f := range fs {
			if t, _ := redirectTarget(f); t == to {
				mine = append(mine, f)
			}
		}
		return deleteFilters(h, host, mine)
	})
	return nil
}

// ensureIngressHook makes sure l has a qdisc with an ingress hook (ffff:,
// an ingress qdisc or a clsact), making a clsact when there is none; made
// says whether it did.
func ensureIngressHook(h *netlink.Handle, l netlink.Link) (made bool, err error) {
	if q, err := ingressHookQdisc(h, l); err != nil || q != nil {
		return false, err
	}
	err = h.QdiscAdd(&netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Handle: ingressHandle, Parent: netlink.HANDLE_INGRESS}})
	if errors.Is(err, unix.EEXIST) {
		return false, nil // another tool made one meanwhile: share it
	}
	return err == nil, err
}

// ingressHookQdisc is l's qdisc at ffff: (ingress or clsact), or nil.
func ingressHookQdisc(h *netlink.Handle, l netlink.Link) (netlink.Qdisc, error) {
	qs, err := h.QdiscList(l)
	if err != nil {
		return nil, fmt.Errorf("qdiscs of %q: %w", l.Attrs().Name, err)
	}
	for _, q := range qs {
		if q.Attrs().Parent == netlink.HANDLE_INGRESS {
			return q, nil
		}
	}
	return nil, nil
}

// redirectTarget is the link a u32 filter with a mirred egress redirect
// (bandwidth's shape of filter) sends to: 0 when that link is gone (the
// kernel reports the index of a deleted target as 0). ok is false for any
// other filter.
func redirectTarget(f netlink.Filter) (index int, ok bool) {
	u, isU32 := f.(*netlink.U32)
	if !isU32 {
		return 0, false
	}
	for _, act := range u.Actions {
		if m, isMirred := act.(*netlink.MirredAction); isMirred && m.MirredAction == netlink.TCA_EGRESS_REDIR {
			return m.Ifindex, true
		}
	}
	return 0, false
}

// bandwidthRedirects are the filters on l's ingress hook that bandwidth
// (ours or upstream's) made: a redirect to an ifb named "bwp…", or to a
// link that is gone (upstream's DEL deletes the ifb and leaves the
// redirect). Another tool's filters are never among them.
func bandwidthRedirects(h *netlink.Handle, l netlink.Link) ([]netlink.Filter, error) {
	fs, err := h.FilterList(l, ingressHook)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL) {
			return nil, nil // no ingress hook
		}
		return nil, fmt.Errorf("filters of %q: %w", l.Attrs().Name, err)
	}
	var ours []netlink.Filter
	for _, f := range fs {
		to, ok := redirectTarget(f)
		if !ok {
			continue
		}
		t, err := h.LinkByIndex(to)
		if err != nil || (t.Type() == "ifb" && strings.HasPrefix(t.Attrs().Name, "bwp")) {
			ours = append(ours, f)
		}
	}
	return ours, nil
}

// deleteRedirects deletes bandwidth's redirects on l's ingress hook:
// another tool's filters stay.
func deleteRedirects(h *netlink.Handle, l netlink.Link) error {
	fs, err := bandwidthRedirects(h, l)
	if err != nil {
		return err
	}
	return deleteFilters(h, l, fs)
}

// deleteFilters deletes the u32 filters fs on l's ingress hook, each by
// its handle, then the u32 classifier at each priority they were at when
// nothing else is left in it: deleting a u32 filter by its handle leaves
// its classifier (with an empty hash table) at that priority (issue 29).
// One that holds another tool's u32 filters stays.
func deleteFilters(h *netlink.Handle, l netlink.Link, fs []netlink.Filter) error {
	type slot struct{ prio, proto uint16 }
	var errs []error
	emptied := map[slot]bool{}
	for _, f := range fs {
		if err := h.FilterDel(f); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("delete redirect of %q (pref %d): %w", l.Attrs().Name, f.Attrs().Priority, err))
			continue
		}
		emptied[slot{f.Attrs().Priority, f.Attrs().Protocol}] = true
	}
	if len(emptied) == 0 {
		return errors.Join(errs...)
	}
	left, err := h.FilterList(l, ingressHook)
	if err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
		return errors.Join(append(errs, fmt.Errorf("filters of %q: %w", l.Attrs().Name, err))...)
	}
	for _, f := range left {
		delete(emptied, slot{f.Attrs().Priority, f.Attrs().Protocol})
	}
	for s := range emptied {
		// Handle 0 names the classifier at the priority, not a filter in it.
		u := &netlink.GenericFilter{FilterType: "u32", FilterAttrs: netlink.FilterAttrs{
			LinkIndex: l.Attrs().Index, Parent: ingressHook, Priority: s.prio, Protocol: s.proto}}
		if err := h.FilterDel(u); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("delete the empty u32 of %q (pref %d): %w", l.Attrs().Name, s.prio, err))
		}
	}
	return errors.Join(errs...)
}

// deleteIngressHookIfUnused deletes l's ingress or clsact qdisc when no
// filter is left on it (on either hook of a clsact): bandwidth made it
// (upstream an ingress qdisc, we a clsact) or nobody uses it. One with
// another tool's filters stays as it is.
func deleteIngressHookIfUnused(h *netlink.Handle, l netlink.Link) error {
	q, err := ingressHookQdisc(h, l)
	if err != nil || q == nil {
		return err
	}
	for _, hook := range []uint32{ingressHook, netlink.HANDLE_MIN_EGRESS} {
		fs, err := h.FilterList(l, hook)
		if err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("filters of %q: %w", l.Attrs().Name, err)
		}
		if len(fs) > 0 {
			return nil
		}
	}
	if err := qdiscDel(h, q); err != nil {
		return fmt.Errorf("%q: %w", l.Attrs().Name, err)
	}
	return nil
}

// ensureIfb makes the ifb, up, with the host end's MTU and upstream's
// queue length, in the network's link group, and marks it with the alias
// GC reads; made says whether it made it. An ifb already there has this
// attachment's name (network and container ID): an earlier ADD's, or one a
// killed ADD left. It is kept, so that a redirect to it stays valid, and
// brought in line.
func ensureIfb(h *netlink.Handle, name, alias string, group uint32, mtu int) (l netlink.Link, made bool, err error) {
	la := netlink.NewLinkAttrs()
	la.Name = name
	la.Group = group
	la.MTU = mtu
	la.TxQLen = 1000
	la.Flags = unix.IFF_UP
	err = h.LinkAdd(&netlink.Ifb{LinkAttrs: la})
	switch {
	case err == nil:
		made = true
	case !errors.Is(err, unix.EEXIST):
		return nil, false, fmt.Errorf("add ifb %q: %w", name, err)
	}
	l, err = ip.LinkByName(h, name)
	if err == nil && !made {
		err = alignIfb(h, l, group, mtu)
	}
	if err == nil && l.Attrs().Alias != alias {
		err = h.LinkSetAlias(l, alias)
	}
	if err == nil && l.Attrs().Flags&net.FlagUp == 0 {
		err = h.LinkSetUp(l)
	}
	if err != nil {
		if made {
			_ = ip.DelLinkByName(h, name) // best effort: the undo is not pushed yet
		}
		return nil, false, fmt.Errorf("ifb %q: %w", name, err)
	}
	return l, made, nil
}

// alignIfb gives an ifb that was there the group and MTU ADD makes one
// with.
func alignIfb(h *netlink.Handle, l netlink.Link, group uint32, mtu int) error {
	if l.Type() != "ifb" {
		return fmt.Errorf("exists, and is a %s, not an ifb", l.Type())
	}
	if l.Attrs().Group != group {
		if err := h.LinkSetGroup(l, int(group)); err != nil {
			return err
		}
	}
	if l.Attrs().MTU != mtu {
		return h.LinkSetMTU(l, mtu)
	}
	return nil
}

func qdiscDel(h *netlink.Handle, q netlink.Qdisc) error {
	if err := h.QdiscDel(q); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENODEV) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("delete %s qdisc: %w", q.Type(), err)
	}
	return nil
}

// del deletes the shaping ADD put on the host end, then the ifb by name
// (no netns and no prevResult needed: an upstream ADD's ifb has the same
// name). The host end is each veth prevResult lists as a host interface
// and, with or without prevResult, the peer of CNI_IFNAME when CNI_NETNS is
// still there: a DEL without prevResult must not leave the tbf that would
// fail the next ADD on that veth (issue 22). Usually the main plugin's DEL
// then deletes the veth, which takes the rest along.
func del(a *attach.Attachment, c *netConf) []error {
	hostNS, h, err := a.Host()
	if err != nil {
		return []error{err}
	}
	var errs []error
	for _, l := range delHostEnds(a, h) {
		if err := deleteShaping(h, l); err != nil {
			errs = append(errs, fmt.Errorf("in %s: %w", hostNS.Path(), err))
		}
	}
	if err := ip.DelLinkByName(h, IfbName(c.Name, a.Args.ContainerID)); err != nil {
		errs = append(errs, fmt.Errorf("in %s: %w", hostNS.Path(), err))
	}
	return errs
}

// delHostEnds finds the host ends DEL cleans: the host veths prevResult
// lists, and the veth peer of CNI_IFNAME. What cannot be read (no
// prevResult, the netns gone) is skipped: DEL does not fail on it.
func delHostEnds(a *attach.Attachment, h *netlink.Handle) []netlink.Link {
	var ends []netlink.Link
	seen := map[int]bool{}
	addEnd := func(l netlink.Link) {
		if l != nil && l.Type() == "veth" && !seen[l.Attrs().Index] {
			seen[l.Attrs().Index] = true
			ends = append(ends, l)
		}
	}
	if prev, err := a.Conf.Prev(); err == nil && prev != nil {
		for _, iface := range prev.Interfaces {
			if iface.Sandbox != "" || strings.HasPrefix(iface.Name, "bwp") {
				continue
			}
			if l, err := ip.LinkByName(h, iface.Name); err == nil {
				addEnd(l)
			}
		}
	}
	if a.Args.Netns == "" || a.Args.IfName == "" {
		return ends
	}
	if _, contH, err := a.Container(); err == nil {
		if cl, err := ip.LinkByName(contH, a.Args.IfName); err == nil {
			// The index is the peer's in its own namespace: the link with
			// it here is the peer only if it points back at cl.
			if peer, err := ip.PeerIndex(contH, cl); err == nil {
				if l, err := h.LinkByIndex(peer); err == nil && l.Attrs().ParentIndex == cl.Attrs().Index {
					addEnd(l)
				}
			}
		}
	}
	return ends
}

// deleteShaping deletes what ADD puts on a host end l: the root tbf, and
// bandwidth's redirect on the ingress hook, with the hook's qdisc when no
// other filter is left on it. Another tool's qdisc and filters stay.
func deleteShaping(h *netlink.Handle, l netlink.Link) error {
	qs, err := h.QdiscList(l)
	if err != nil {
		return fmt.Errorf("qdiscs of %q: %w", l.Attrs().Name, err)
	}
	var errs []error
	for _, q := range qs {
		if ownRoot(q) {
			if err := qdiscDel(h, q); err != nil {
				errs = append(errs, fmt.Errorf("%q: %w", l.Attrs().Name, err))
			}
		}
	}
	fs, err := bandwidthRedirects(h, l)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if len(fs) > 0 {
		if err := deleteRedirects(h, l); err != nil {
			errs = append(errs, err)
		} else if err := deleteIngressHookIfUnused(h, l); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// redirectsTo reports whether the ingress of l is redirected to the link
// with index ifb (the egress shaping ADD sets up).
func redirectsTo(h *netlink.Handle, l netlink.Link, ifb int) bool {
	fs, err := h.FilterList(l, ingressHook)
	if err != nil {
		return false // no ingress hook
	}
	for _, f := range fs {
		if to, ok := redirectTarget(f); ok && to == ifb {
			return true
		}
	}
	return false
}

// check compares the kernel with the config: the tbf on the host end, and
// for egress the ifb, the ingress qdisc, the redirect and the ifb's tbf.
func check(a *attach.Attachment, c *netConf, prev *current.Result) error {
	if c.bw.isZero() {
		return nil
	}
	p, err := resolve(a, c, prev)
	if err != nil {
		return err
	}
	hostNS, h, err := a.Host()
	if err != nil {
		return err
	}
	hostName := p.host.Attrs().Name
	if p.ingress != nil {
		if err := checkTbf(h, p.host, *p.ingress, p.upIngress); err != nil {
			return fmt.Errorf("%q in %s: %w", hostName, hostNS.Path(), err)
		}
	}
	if p.egress == nil {
		return nil
	}
	ifb, err := ip.LinkByName(h, p.ifbName)
	if err != nil {
		return fmt.Errorf("ifb in %s: %w", hostNS.Path(), err)
	}
	if ifb.Type() != "ifb" {
		return fmt.Errorf("%q in %s is a %s, not an ifb", p.ifbName, hostNS.Path(), ifb.Type())
	}
	if ifb.Attrs().Flags&net.FlagUp == 0 {
		// What the container sends is redirected to it: dropped.
		return fmt.Errorf("ifb %q in %s is down", p.ifbName, hostNS.Path())
	}
	if err := checkTbf(h, ifb, *p.egress, p.upEgress); err != nil {
		return fmt.Errorf("%q in %s: %w", p.ifbName, hostNS.Path(), err)
	}
	if q, err := ingressHookQdisc(h, p.host); err != nil {
		return fmt.Errorf("in %s: %w", hostNS.Path(), err)
	} else if q == nil {
		return fmt.Errorf("%q in %s has no ingress or clsact qdisc", hostName, hostNS.Path())
	}
	if !redirectsTo(h, p.host, ifb.Attrs().Index) {
		return fmt.Errorf("the ingress of %q in %s is not redirected to %q", hostName, hostNS.Path(), p.ifbName)
	}
	return nil
}

// checkTbf compares the root tbf of l with want, or with upstream's
// parameters for the same limits (an attachment upstream made).
func checkTbf(h *netlink.Handle, l netlink.Link, want, upstream tbfParams) error {
	qs, err := h.QdiscList(l)
	if err != nil {
		return err
	}
	for _, q := range qs {
		t, ok := q.(*netlink.Tbf)
		if !ok || q.Attrs().Parent != netlink.HANDLE_ROOT {
			continue
		}
		got := tbfParams{Rate: t.Rate, Buffer: t.Buffer, Limit: t.Limit}
		if got != want && got != upstream {
			return fmt.Errorf("tbf has rate %d B/s buffer %d limit %d, configured rate %d B/s buffer %d limit %d",
				t.Rate, t.Buffer, t.Limit, want.Rate, want.Buffer, want.Limit)
		}
		return nil
	}
	return errors.New("no tbf root qdisc")
}

// gc deletes the ifbs this suite made for network c.Name (by their alias,
// or, without one, by their link group) whose container is not in keep,
// and the shaping of the host end that redirects to one. Upstream's ifbs
// carry no alias and stay:
// their name does not say which network they belong to.
func gc(a *attach.Attachment, c *netConf, keep []netfilter.Owner) []error {
	hostNS, h, err := a.Host()
	if err != nil {
		return []error{err}
	}
	kept := map[string]bool{}
	for _, o := range keep {
		kept[ifbAlias(c.Name, o.ContainerID)] = true
	}
	links, err := ip.LinkList(h)
	if err != nil {
		return []error{fmt.Errorf("in %s: %w", hostNS.Path(), err)}
	}
	keptNames := map[string]bool{}
	for _, o := range keep {
		keptNames[IfbName(c.Name, o.ContainerID)] = true
	}
	var errs []error
	mine, group := ifbAlias(c.Name, ""), IfbGroup(c.Name)
	for _, l := range links {
		al, name := l.Attrs().Alias, l.Attrs().Name
		if l.Type() != "ifb" || !strings.HasPrefix(name, "bwp") {
			continue
		}
		switch {
		case al == "" && l.Attrs().Group == group:
			// An ADD killed between making the ifb and setting its alias:
			// the group says whose, the name whether a listed container's.
			if keptNames[name] {
				continue
			}
		case !strings.HasPrefix(al, mine) || kept[al]:
			continue
		case IfbName(c.Name, strings.TrimPrefix(al, mine)) != name:
			continue // an alias that does not match the name: not ours
		}
		// A host end still there (its container is gone, or its main
		// plugin kept it) loses the shaping that sends its traffic to the
		// ifb, and the tbf beside it. An ingress-only attachment has no
		// ifb, and GC cannot tell its tbf from an admin's.
		for _, hl := range links {
			if hl.Type() == "veth" && redirectsTo(h, hl, l.Attrs().Index) {
				a.Log.Info("gc: deleting shaping", "link", hl.Attrs().Name)
				if err := deleteShaping(h, hl); err != nil {
					errs = append(errs, fmt.Errorf("in %s: %w", hostNS.Path(), err))
				}
			}
		}
		a.Log.Info("gc: deleting ifb", "ifb", l.Attrs().Name)
		if err := ip.DelLinkByName(h, l.Attrs().Name); err != nil {
			errs = append(errs, fmt.Errorf("in %s: %w", hostNS.Path(), err))
		}
	}
	return errs
}
