package iptnft

import (
	"bytes"
	"net"
	"strings"

	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"

	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// iptSaveSpec renders the rule exprs of family f's nat table as
// iptables-save prints it (without "-A <chain> "), for the shapes this
// package and upstream's plugins write:
//
//	[[!] -s P] [[!] -d P] -m comment --comment C [-j ACCEPT|MASQUERADE|<chain>]
//
// ok is false for any other rule, and for one of these shapes not encoded
// as iptables-nft encodes its spec (iptRuleExprs, iptAddrMatch,
// masqueradeTarget): the rendering is trusted only when encoding it again
// gives exprs back, attribute for attribute (counters aside).
func IptSaveSpec(f nftnl.Family, exprs []expr.Any) (string, bool) {
	var (
		parts   []string
		matches []expr.Any
		rest    = exprs
	)
	for _, dst := range []bool{false, true} {
		p, neq, n, ok := readIPTAddr(f, dst, rest)
		if !ok {
			continue
		}
		enc, ok := IptAddrMatch(f, dst, p, neq)
		if !ok {
			return "", false
		}
		opt := "-s "
		if dst {
			opt = "-d "
		}
		if neq {
			opt = "! " + opt
		}
		parts = append(parts, opt+p.String())
		matches = append(matches, enc...)
		rest = rest[n:]
	}
	if len(rest) < 2 {
		return "", false
	}
	m, ok := rest[0].(*expr.Match)
	if !ok || m.Name != "comment" {
		return "", false
	}
	c, ok := m.Info.(*xt.Comment)
	if !ok || strings.IndexByte(string(*c), 0) >= 0 {
		return "", false // iptables-save would print it up to the NUL
	}
	parts = append(parts, "-m comment --comment "+IptSaveString(string(*c)))
	var target expr.Any
	switch len(rest) {
	case 2:
	case 3:
		switch t := rest[2].(type) {
		case *expr.Verdict:
			switch {
			case t.Kind == expr.VerdictAccept:
				parts = append(parts, "-j ACCEPT")
			case t.Kind == expr.VerdictJump && t.Chain != "":
				parts = append(parts, "-j "+t.Chain)
			default:
				return "", false
			}
			target = &expr.Verdict{Kind: t.Kind, Chain: t.Chain}
		case *expr.Target:
			if t.Name != "MASQUERADE" {
				return "", false
			}
			parts = append(parts, "-j MASQUERADE")
			target = MasqueradeTarget(f)
		default:
			return "", false
		}
	default:
		return "", false
	}
	if !SameExprs(f, exprs, IptRuleExprs(matches, string(*c), target)) {
		return "", false
	}
	return strings.Join(parts, " "), true
}

// readIPTAddr reads an address match of the source (dst false) or
// destination at the head of exprs, in either form iptAddrMatch writes:
// a load of the prefix's whole bytes and a compare, or a load of the whole
// address, a mask and a compare. n is how many exprs it took; ok false
// when the head is no such match.
func readIPTAddr(f nftnl.Family, dst bool, exprs []expr.Any) (p *net.IPNet, neq bool, n int, ok bool) {
	off, size := nftnl.AddrField[f].Saddr, nftnl.AddrField[f].Len
	if dst {
		off = nftnl.AddrField[f].Daddr
	}
	if len(exprs) < 2 {
		return nil, false, 0, false
	}
	pl, ok := exprs[0].(*expr.Payload)
	if !ok || pl.Base != expr.PayloadBaseNetworkHeader || pl.Offset != off || pl.Len == 0 || pl.Len > size {
		return nil, false, 0, false
	}
	ones := int(pl.Len) * 8
	n = 1
	if b, isMask := exprs[1].(*expr.Bitwise); isMask {
		if ones = maskBits(b.Mask); ones < 0 || len(exprs) < 3 {
			return nil, false, 0, false
		}
		n = 2
	}
	cmp, ok := exprs[n].(*expr.Cmp)
	if !ok || (cmp.Op != expr.CmpOpEq && cmp.Op != expr.CmpOpNeq) || len(cmp.Data) > int(size) {
		return nil, false, 0, false
	}
	ip := make(net.IP, size)
	copy(ip, cmp.Data)
	mask := net.CIDRMask(ones, int(size)*8)
	if mask == nil {
		return nil, false, 0, false
	}
	return &net.IPNet{IP: ip.Mask(mask), Mask: mask}, cmp.Op == expr.CmpOpNeq, n + 1, true
}

// sameExprs reports whether two rules' expressions encode the same on the
// wire, counters' values aside.
func SameExprs(f nftnl.Family, a, b []expr.Any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if _, ok := a[i].(*expr.Counter); ok {
			if _, ok := b[i].(*expr.Counter); !ok {
				return false
			}
			continue
		}
		ea, err1 := expr.Marshal(byte(f.Nft()), a[i])
		eb, err2 := expr.Marshal(byte(f.Nft()), b[i])
		if err1 != nil || err2 != nil || !bytes.Equal(ea, eb) {
			return false
		}
	}
	return true
}

// iptSaveString is a match option's value as iptables-save prints it:
// bare when it is made of letters, digits, '_' and '-' only, else in
// double quotes, with each double quote, backslash and single quote
// escaped by a backslash.
func IptSaveString(s string) string {
	bare := s != ""
	for i := 0; i < len(s) && bare; i++ {
		c := s[i]
		bare = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
	}
	if bare {
		return s
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ { // bytes, not runes: the kernel holds bytes
		if c := s[i]; c == '"' || c == '\\' || c == '\'' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
	return b.String()
}
