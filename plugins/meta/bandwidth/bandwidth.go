package bandwidth

import (
	"errors"
	"fmt"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/owner"
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
	_, h, err := a.Host()
	if err != nil {
		return nil, err
	}
	hostName := p.host.Attrs().Name

	if p.ingress != nil {
		q := tbf(p.host.Attrs().Index, *p.ingress)
		if err := replaceRoot(h, q); err != nil {
			return nil, fmt.Errorf("add tbf to %q: %w", hostName, err)
		}
		a.Undo.Push("delete tbf of "+hostName, func() error { return qdiscDel(h, q) })
	}
	if err := a.Step(StepIngress); err != nil {
		return nil, err
	}
	if p.egress == nil {
		return res, nil
	}

	ifb, err := setupIfb(h, p.ifbName, p.ifAlias, IfbGroup(c.Name), p.host.Attrs().MTU)
	if err != nil {
		return nil, err
	}
	a.Undo.Push("delete ifb "+p.ifbName, func() error { return ip.DelLinkByName(h, p.ifbName) })
	if err := a.Step(StepIfb); err != nil {
		return nil, err
	}

	if err := setupRedirect(a, h, p.host, ifb); err != nil {
		return nil, err
	}
	if err := a.Step(StepRedirect); err != nil {
		return nil, err
	}

	if err := h.QdiscAdd(tbf(ifb.Attrs().Index, *p.egress)); err != nil {
		return nil, fmt.Errorf("add tbf to %q: %w", p.ifbName, err)
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

// replaceRoot makes q the root qdisc of its link. The root of the host end
// is bandwidth's slot: a tbf left there (by upstream's DEL, which never
// removes it, or by a DEL without prevResult) is replaced, not "file
// exists" (issue 22). A root qdisc of another kind with our handle cannot
// be changed into a tbf in place: it is deleted first.
func replaceRoot(h *netlink.Handle, q netlink.Qdisc) error {
	err := h.QdiscReplace(q)
	if errors.Is(err, unix.EINVAL) {
		root := &netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: q.Attrs().LinkIndex, Parent: netlink.HANDLE_ROOT}}
		if err := qdiscDel(h, root); err != nil {
			return err
		}
		err = h.QdiscAdd(q)
	}
	return err
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

// setupRedirect sends what the container sends (the host end's ingress)
// to the ifb: a u32 filter matching everything, with a mirred egress
// redirect, on the ingress hook. The hook's qdisc (ffff:) may be there
// already: another tool's clsact, or the ingress qdisc of an earlier ADD.
// It is reused, never replaced; only when there is none is a clsact made
// (not upstream's ingress qdisc: a tool that comes later can share a
// clsact, and cannot turn an ingress qdisc into one). Redirects bandwidth
// left on the hook (to an ifb that is gone) are removed first: they would
// drop the traffic.
func setupRedirect(a *attach.Attachment, h *netlink.Handle, host, ifb netlink.Link) error {
	hostName := host.Attrs().Name
	made, err := ensureIngressHook(h, host)
	if err != nil {
		return fmt.Errorf("clsact qdisc on %q: %w", hostName, err)
	}
	if made {
		a.Undo.Push("delete clsact qdisc of "+hostName, func() error { return deleteIngressHookIfUnused(h, host) })
	}
	if err := deleteRedirects(h, host); err != nil {
		return err
	}
	f := redirect(host.Attrs().Index, ifb.Attrs().Index)
	if err := h.FilterAdd(f); err != nil {
		return fmt.Errorf("redirect the ingress of %q to %q (u32, mirred): %w", hostName, ifb.Attrs().Name, err)
	}
	a.Undo.Push("delete redirect of "+hostName, func() error { return deleteRedirects(h, host) })
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

// deleteRedirects deletes bandwidth's redirects on l's ingress hook, each
// by its own priority and handle: another tool's filters stay.
func deleteRedirects(h *netlink.Handle, l netlink.Link) error {
	fs, err := bandwidthRedirects(h, l)
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range fs {
		if err := h.FilterDel(f); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("delete redirect of %q (pref %d): %w", l.Attrs().Name, f.Attrs().Priority, err))
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

// setupIfb creates the ifb, up, with the host end's MTU and upstream's
// queue length, in the network's link group, and marks it with the alias GC
// reads.
func setupIfb(h *netlink.Handle, name, alias string, group uint32, mtu int) (netlink.Link, error) {
	la := netlink.NewLinkAttrs()
	la.Name = name
	la.Group = group
	la.MTU = mtu
	la.TxQLen = 1000
	la.Flags = unix.IFF_UP
	err := h.LinkAdd(&netlink.Ifb{LinkAttrs: la})
	if errors.Is(err, unix.EEXIST) {
		// The name is this attachment's (network and container ID): an ifb
		// there is one an ADD killed before its rollback left.
		if l, lerr := ip.LinkByName(h, name); lerr == nil && l.Type() == "ifb" {
			if err = ip.DelLinkByName(h, name); err == nil {
				err = h.LinkAdd(&netlink.Ifb{LinkAttrs: la})
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("add ifb %q: %w", name, err)
	}
	l, err := ip.LinkByName(h, name)
	if err == nil {
		err = h.LinkSetAlias(l, alias)
	}
	if err == nil {
		err = h.LinkSetUp(l)
	}
	if err != nil {
		_ = ip.DelLinkByName(h, name) // best effort: the undo is not pushed yet
		return nil, fmt.Errorf("ifb %q: %w", name, err)
	}
	return l, nil
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
		if _, isTbf := q.(*netlink.Tbf); isTbf && q.Attrs().Handle == rootHandle && q.Attrs().Parent == netlink.HANDLE_ROOT {
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
func gc(a *attach.Attachment, c *netConf, keep []owner.Owner) []error {
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
