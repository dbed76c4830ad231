package bandwidth

// The tbf qdiscs: their parameters (as upstream computes them, with the
// clamp of a burst tbf cannot hold), and the root slot they take.

import (
	"fmt"
	"math"

	"github.com/vishvananda/netlink"
)

// latencyUsec is how long a packet may wait in tbf (upstream's 25 ms):
// it sets the queue limit.
const latencyUsec = 25000

// tbfParams are the values of one tbf qdisc: rate in bytes/s, buffer in
// the kernel's ticks, limit in bytes.
type tbfParams struct {
	Rate   uint64
	Buffer uint32
	Limit  uint32
}

// tbfFor computes tbf's parameters as upstream does (the burst as whole
// microseconds at the rate, then ticks, both truncated), with tick the
// kernel's ticks per microsecond (netlink.TickInUsec). tbf holds its burst
// as time in a 32-bit count of ticks (2^32 ticks of 64 ns: about 275 s of
// traffic at the rate) and its queue limit (25 ms of traffic plus the
// burst) in a 32-bit count of bytes. Runtimes send bursts far beyond that:
// containerd 4294967295 bits, CRI-O 34359738359 (issue 23). So a burst
// more than tbf can hold at the rate, or of more than 2^32-1 bytes, is
// clamped to the largest one it can hold, and a limit over 2^32-1 bytes to
// that. burst is the burst installed, in bits; clamped says whether it is
// less than the config asks. The same config gives the same parameters, so
// CHECK accepts what ADD installed.
func tbfFor(rateBits, burstBits uint64, tick float64) (p tbfParams, burst uint64, clamped bool) {
	rate := rateBits / 8
	bytes := burstBits / 8
	most := min(uint64(math.MaxUint32/tick*float64(rate)/1e6), math.MaxUint32)
	if bytes > most {
		bytes, clamped = most, true
	}
	usec := math.Trunc(float64(bytes) * 1e6 / float64(rate))
	buffer := min(math.Trunc(usec*tick), math.MaxUint32)
	limit := min(uint64(float64(rate)*latencyUsec/1e6)+bytes, math.MaxUint32)
	return tbfParams{Rate: rate, Buffer: uint32(buffer), Limit: uint32(limit)}, bytes * 8, clamped
}

// upstreamTbf is what upstream's ADD installs for the same rate and
// burst: where ours clamps, its 32-bit conversions wrap (Go's conversion
// of a float out of range, on amd64: through int64, keeping the low 32
// bits). CHECK accepts it too, so an attachment upstream made before the
// node switched suites passes. Upstream refuses bursts of 4 GiB and more.
func upstreamTbf(rateBits, burstBits uint64, tick float64) tbfParams {
	rate, bytes := rateBits/8, uint32(burstBits/8)
	usec := uint32(int64(float64(bytes) * 1e6 / float64(rate)))
	buffer := uint32(int64(float64(usec) * tick))
	limit := uint32(int64(float64(rate)*latencyUsec/1e6)) + bytes
	return tbfParams{Rate: rate, Buffer: buffer, Limit: limit}
}

var (
	rootHandle    = netlink.MakeHandle(1, 0)
	ingressHandle = netlink.MakeHandle(0xffff, 0)
)

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

// qdiscDel deletes q; one already gone (tcGone) is success.
func qdiscDel(h *netlink.Handle, q netlink.Qdisc) error {
	if err := h.QdiscDel(q); err != nil && !tcGone(qdiscDelete, err) {
		return fmt.Errorf("delete %s qdisc: %w", q.Type(), err)
	}
	return nil
}
