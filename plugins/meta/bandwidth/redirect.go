package bandwidth

// The host end's ingress hook: its qdisc (clsact or ingress), the u32
// redirect to the ifb, and which redirects are bandwidth's.

import (
	"errors"
	"fmt"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/attach"
)

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
		if err := h.FilterDel(f); err != nil && !filterGone(h, l, err) {
			errs = append(errs, fmt.Errorf("delete redirect of %q (pref %d): %w", l.Attrs().Name, f.Attrs().Priority, err))
			continue
		}
		emptied[slot{f.Attrs().Priority, f.Attrs().Protocol}] = true
	}
	if len(emptied) == 0 {
		return errors.Join(errs...)
	}
	left, err := h.FilterList(l, ingressHook)
	if err != nil && !tcGone(hookList, err) {
		return errors.Join(append(errs, fmt.Errorf("filters of %q: %w", l.Attrs().Name, err))...)
	}
	for _, f := range left {
		delete(emptied, slot{f.Attrs().Priority, f.Attrs().Protocol})
	}
	for s := range emptied {
		// Handle 0 names the classifier at the priority, not a filter in it.
		u := &netlink.GenericFilter{FilterType: "u32", FilterAttrs: netlink.FilterAttrs{
			LinkIndex: l.Attrs().Index, Parent: ingressHook, Priority: s.prio, Protocol: s.proto}}
		if err := h.FilterDel(u); err != nil && !filterGone(h, l, err) {
			errs = append(errs, fmt.Errorf("delete the empty u32 of %q (pref %d): %w", l.Attrs().Name, s.prio, err))
		}
	}
	return errors.Join(errs...)
}

// filterGone reports whether a filter delete on l's ingress hook failed
// only because the filter is gone: tcGone's errnos, or EINVAL when the
// hook's qdisc itself went meanwhile (another DEL or GC of the same
// attachment, a tool clearing the link's qdiscs) with every filter on it:
// the kernel then finds no parent for the request
// (TestDeleteRedirectsOfAVanishedHook). An EINVAL while the hook is there
// stays an error. Every filter delete asks here, not tcGone.
func filterGone(h *netlink.Handle, l netlink.Link, err error) bool {
	if tcGone(filterDelete, err) {
		return true
	}
	if !errors.Is(err, unix.EINVAL) {
		return false
	}
	q, qerr := ingressHookQdisc(h, l)
	return qerr == nil && q == nil
}

// tcRequest is the kind of tc request a DEL makes on something that may
// be gone already; which errnos mean "gone" depends on it (see tcGone).
type tcRequest int

const (
	filterDelete tcRequest = iota // a filter by handle, or a u32 classifier by priority
	hookList                      // the filters of an ingress hook, read to decide a delete
	qdiscDelete                   // a qdisc by parent and handle
)

// tcGone reports whether a tc request of kind r failed only because what
// it names is already gone, which for a delete is success:
//   - ENOENT: the object itself: no filter with that handle, no classifier
//     at that priority, no qdisc at that parent (the ingress hook of a link
//     that never had an ingress qdisc or clsact).
//   - ENODEV: the whole link, and everything on it: the container's netns
//     went away and the kernel removed the veth pair (asynchronously)
//     between a DEL's listing and its delete
//     (TestDeleteRedirectsOfAVanishedLink, TestDeleteQdiscsOfAVanishedLink).
//   - EINVAL, for a qdisc delete: the request names the qdisc's handle
//     (tbf 1:, clsact or ingress ffff:), and the slot holds another one:
//     the kernel's default (handle 0) once ours is gone, so the kernel
//     answers "invalid handle", not ENOENT: a second delete of the root
//     tbf, or of the clsact of a link that had one
//     (TestDeleteQdiscsAlreadyGone). A hook listing accepts what the
//     qdisc delete it prepares accepts (the hook is that qdisc's); the
//     kernel's dump answers a missing hook or link with an empty list, so
//     none of the three is seen there on the kernels we test.
//
// For a filter delete EINVAL alone says nothing: the kernel answers it for
// a request it cannot parse, and also when the hook's qdisc went between
// the listing and the delete ("parent qdisc doesn't exist"); filterGone
// tells the two apart by looking for the hook.
func tcGone(r tcRequest, err error) bool {
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENODEV):
		return true
	case errors.Is(err, unix.EINVAL):
		return r != filterDelete
	}
	return false
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
		if err != nil && !tcGone(hookList, err) {
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
