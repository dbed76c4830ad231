package hostlocal

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/containernetworking/cni/pkg/version"
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

func parseRangeSet(key string, set []rangeIn) (RangeSet, error) {
	if len(set) == 0 {
		return RangeSet{}, fmt.Errorf("%s: empty range set", key)
	}
	rs := RangeSet{Key: key}
	for j, in := range set {
		r, err := parseRange(fmt.Sprintf("%s[%d].", key, j), in)
		if err != nil {
			return RangeSet{}, err
		}
		if j > 0 && r.Subnet.Addr().Is4() != rs.Ranges[0].Subnet.Addr().Is4() {
			return RangeSet{}, fmt.Errorf("%s[%d].subnet: %s mixes address families with %s in one range set",
				key, j, r.Subnet, rs.Ranges[0].Subnet)
		}
		for k, prev := range rs.Ranges {
			if r.overlaps(prev) {
				return RangeSet{}, fmt.Errorf("%s[%d]: range %s overlaps %s[%d] range %s", key, j, r, key, k, prev)
			}
		}
		rs.Ranges = append(rs.Ranges, r)
	}
	return rs, nil
}

// parseRange validates one range; prefix is the key up to and including the
// dot ("ipam." or "ipam.ranges[0][1].").
func parseRange(prefix string, in rangeIn) (Range, error) {
	var r Range
	if in.Subnet == "" {
		return r, fmt.Errorf("%ssubnet: missing", prefix)
	}
	p, err := netip.ParsePrefix(in.Subnet)
	if err != nil {
		return r, fmt.Errorf("%ssubnet: %q is not a CIDR", prefix, in.Subnet)
	}
	if p.Addr().Is4In6() {
		if p.Bits() < 96 {
			return r, fmt.Errorf("%ssubnet: %q mixes IPv4-mapped and IPv6 addresses", prefix, in.Subnet)
		}
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96) // ::ffff:10.0.0.0/120 is 10.0.0.0/24
	}
	if p.Masked() != p {
		return r, fmt.Errorf("%ssubnet: %s has host bits set (the network is %s)", prefix, in.Subnet, p.Masked())
	}
	if p.Bits() > p.Addr().BitLen()-2 {
		return r, fmt.Errorf("%ssubnet: %s is too small to allocate from (at most /%d)", prefix, p, p.Addr().BitLen()-2)
	}
	r.Subnet = p
	network := p.Addr()
	last := lastAddr(p)
	firstHost := network.Next()
	lastHost := last
	if network.Is4() {
		lastHost = last.Prev() // the broadcast address is never a host's
	}

	addr := func(key, s string, def netip.Addr) (netip.Addr, error) {
		if s == "" {
			return def, nil
		}
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Addr{}, fmt.Errorf("%s%s: %q is not an IP address", prefix, key, s)
		}
		return a.Unmap(), nil
	}
	// rangeStart and rangeEnd must lie in the subnet, as upstream's
	// Canonicalize asks. A range that starts at the network address, or
	// ends at the IPv4 broadcast address (upstream takes both, and would
	// hand them out), starts after it or ends before it: neither is ever
	// a host's address.
	bound := func(key, s string, def, clampFrom, clampTo netip.Addr) (netip.Addr, error) {
		a, err := addr(key, s, def)
		if err != nil {
			return a, err
		}
		if !p.Contains(a) {
			return netip.Addr{}, fmt.Errorf("%s%s: %s not in subnet %s", prefix, key, a, p)
		}
		if a == clampFrom {
			return clampTo, nil
		}
		if a == network || (network.Is4() && a == last) {
			return netip.Addr{}, fmt.Errorf("%s%s: %s leaves no host address in the range of %s", prefix, key, a, p)
		}
		return a, nil
	}
	if r.Start, err = bound("rangeStart", in.RangeStart, firstHost, network, firstHost); err != nil {
		return r, err
	}
	endFrom := netip.Addr{} // IPv6 has no broadcast address
	if network.Is4() {
		endFrom = last
	}
	if r.End, err = bound("rangeEnd", in.RangeEnd, lastHost, endFrom, lastHost); err != nil {
		return r, err
	}
	// The gateway is only reported, never handed out: upstream takes any
	// address there, in the subnet or not. One of the other IP family
	// would fail in the interface plugin: it is refused here.
	if r.Gateway, err = addr("gateway", in.Gateway, firstHost); err != nil {
		return r, err
	}
	if r.Gateway.Is4() != network.Is4() {
		return r, fmt.Errorf("%sgateway: %s is not of the IP family of subnet %s", prefix, r.Gateway, p)
	}
	if r.Start.Compare(r.End) > 0 {
		return r, fmt.Errorf("%srangeEnd: %s is before rangeStart %s", prefix, r.End, r.Start)
	}
	if r.Start == r.End && r.Start == r.Gateway {
		return r, fmt.Errorf("%srangeStart: range %s holds only the gateway", prefix, r)
	}
	return r, nil
}

// checkSetOverlap refuses two range sets that could hand out the same
// address: each would believe it owns it.
func checkSetOverlap(sets []RangeSet) error {
	for i := range sets {
		for j := 0; j < i; j++ {
			for _, a := range sets[i].Ranges {
				for _, b := range sets[j].Ranges {
					if a.overlaps(b) {
						return fmt.Errorf("%s: range %s overlaps range %s of %s", sets[i].Key, a, b, sets[j].Key)
					}
				}
			}
		}
	}
	return nil
}

// checkOldResultFits refuses configs whose addresses a 0.1.0/0.2.0 result
// cannot carry: those results hold one IPv4 and one IPv6 address, and the
// cni library drops the rest silently, which would reserve addresses the
// runtime never learns about.
func checkOldResultFits(cniVersion string, sets []RangeSet) error {
	if cniVersion == "" {
		return nil
	}
	if ok, err := version.GreaterThanOrEqualTo(cniVersion, "0.3.0"); err != nil || ok {
		return nil // an unparsable version is skel's to refuse
	}
	var v4, v6 int
	for _, s := range sets {
		if s.Ranges[0].Subnet.Addr().Is4() {
			v4++
		} else {
			v6++
		}
	}
	if v4 > 1 || v6 > 1 {
		return fmt.Errorf("ipam.ranges: cniVersion %s results hold one IPv4 and one IPv6 address, but %d IPv4 and %d IPv6 range sets are configured",
			cniVersion, v4, v6)
	}
	return nil
}
