package hostlocal

import (
	"net/netip"
	"strings"
)

// lastAddr is the highest address of p (all host bits set).
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As16()
	off := 0
	if p.Addr().Is4() {
		off = 96
	}
	for bit := off + p.Bits(); bit < 128; bit++ {
		b[bit/8] |= 0x80 >> (bit % 8)
	}
	a := netip.AddrFrom16(b)
	if p.Addr().Is4() {
		return a.Unmap()
	}
	return a
}

func (r Range) String() string { return r.Start.String() + "-" + r.End.String() }

// contains reports whether a lies between Start and End.
func (r Range) contains(a netip.Addr) bool {
	return a.BitLen() == r.Start.BitLen() && r.Start.Compare(a) <= 0 && a.Compare(r.End) <= 0
}

func (r Range) overlaps(o Range) bool {
	if r.Start.BitLen() != o.Start.BitLen() {
		return false
	}
	return r.Start.Compare(o.End) <= 0 && o.Start.Compare(r.End) <= 0
}

// String is how messages name the set: its ranges, comma-separated
// ("10.1.0.2-10.1.0.3"), as upstream prints it.
func (s RangeSet) String() string {
	parts := make([]string, len(s.Ranges))
	for i, r := range s.Ranges {
		parts[i] = r.String()
	}
	return strings.Join(parts, ",")
}

func (s RangeSet) contains(a netip.Addr) bool {
	return s.rangeOf(a) >= 0
}

func (s RangeSet) rangeOf(a netip.Addr) int {
	for i, r := range s.Ranges {
		if r.contains(a) {
			return i
		}
	}
	return -1
}

// candidates calls try with every address of the set that may be handed
// out, round-robin: it starts after last when last lies in the set (else at
// the first range's start), walks each range to its end, moves on to the next
// range (wrapping to the first) and stops once it is back where it began or
// try returns false. Gateways are skipped: they are never handed out.
func (s RangeSet) candidates(last netip.Addr, try func(netip.Addr) bool) {
	ri, cur := 0, s.Ranges[0].Start
	if last.IsValid() {
		if i := s.rangeOf(last); i >= 0 {
			ri, cur = s.next(i, last)
		}
	}
	startRange, start := ri, cur
	for {
		if cur != s.Ranges[ri].Gateway {
			if !try(cur) {
				return
			}
		}
		ri, cur = s.next(ri, cur)
		if ri == startRange && cur == start {
			return
		}
	}
}

// next is the address after cur in range ri, or the next range's start.
func (s RangeSet) next(ri int, cur netip.Addr) (int, netip.Addr) {
	if cur == s.Ranges[ri].End {
		ri = (ri + 1) % len(s.Ranges)
		return ri, s.Ranges[ri].Start
	}
	return ri, cur.Next()
}

// rangeFor is the range holding a.
func (s RangeSet) rangeFor(a netip.Addr) (Range, bool) {
	if i := s.rangeOf(a); i >= 0 {
		return s.Ranges[i], true
	}
	return Range{}, false
}
