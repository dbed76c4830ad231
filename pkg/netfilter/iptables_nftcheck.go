package netfilter

import (
	"bytes"
	"net"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
)

// checkNFT is Check's short way for iptables-nft: it reads the
// attachment's nat chain and POSTROUTING over netlink, in one generation,
// instead of starting iptables-save (a dynamic binary that loads
// libxtables and its extensions: 5-8 ms, most of a bridge CHECK).
//
// It answers true only when iptables-save would have shown everything
// Check wants: each rule is rendered as iptables-save prints it
// (iptSaveSpec) and the rendering is only trusted when encoding that spec
// again, as iptables-nft does, gives the rule's expressions back. Then
// natTable.missing, the very test Check makes on iptables-save's text,
// judges. Anything else answers false and Check reads with iptables-save
// as before: a missing chain or rule (so the error names what is missing
// the same way), a chain rule it cannot render, a table not as
// iptables-nft makes it (nft's, say), legacy iptables, a failed read.
// So it accepts nothing that Check did not accept before.
func (m *iptablesMasq) checkNFT(f family, want iptablesRules) bool {
	if m.noNFT || !m.isNFTVariant(f) {
		return false
	}
	type view struct{ post, own []*nftables.Rule }
	var v view
	err := withNFT(func(c *nftConn) error {
		if !iptablesPostrouting(c, f) {
			return errNotNFTReady
		}
		table := &nftables.Table{Name: "nat", Family: f.nft()}
		var err error
		v, err = consistentOn(c.nl, func() (view, error) {
			// Of POSTROUTING (a jump per pod) only the rules naming our
			// chain: none other can be a jump Check wants.
			post, err := rulesWith(c, table, "POSTROUTING", []byte(want.chain))
			if err != nil {
				return view{}, err
			}
			own, err := c.GetRules(table, &nftables.Chain{Name: want.chain})
			return view{post, own}, err
		})
		return err
	})
	if err != nil {
		return false // no such chain (ENOENT) included: iptables-save says what is missing
	}
	t := natTable{chains: map[string]bool{"POSTROUTING": true, want.chain: true}, rules: map[string][]string{}}
	for _, r := range v.own {
		spec, ok := iptSaveSpec(f, r.Exprs)
		if !ok {
			// iptables-save may print it as one of want's rules (an
			// earlier MASQUERADE, a marker): only it can tell.
			return false
		}
		t.rules[want.chain] = append(t.rules[want.chain], spec)
	}
	for _, r := range v.post {
		// A jump Check wants is found by its exact spec; a rule that
		// cannot be rendered is none of them (if iptables-save would print
		// it as one, the fallback finds it there).
		if spec, ok := iptSaveSpec(f, r.Exprs); ok {
			t.rules["POSTROUTING"] = append(t.rules["POSTROUTING"], spec)
		}
	}
	return len(t.missing(want)) == 0
}

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
func iptSaveSpec(f family, exprs []expr.Any) (string, bool) {
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
		enc, ok := iptAddrMatch(f, dst, p, neq)
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
	parts = append(parts, "-m comment --comment "+iptSaveString(string(*c)))
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
			target = masqueradeTarget(f)
		default:
			return "", false
		}
	default:
		return "", false
	}
	if !sameExprs(f, exprs, iptRuleExprs(matches, string(*c), target)) {
		return "", false
	}
	return strings.Join(parts, " "), true
}

// readIPTAddr reads an address match of the source (dst false) or
// destination at the head of exprs, in either form iptAddrMatch writes:
// a load of the prefix's whole bytes and a compare, or a load of the whole
// address, a mask and a compare. n is how many exprs it took; ok false
// when the head is no such match.
func readIPTAddr(f family, dst bool, exprs []expr.Any) (p *net.IPNet, neq bool, n int, ok bool) {
	off, size := addrField[f].saddr, addrField[f].len
	if dst {
		off = addrField[f].daddr
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
func sameExprs(f family, a, b []expr.Any) bool {
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
		ea, err1 := expr.Marshal(byte(f.nft()), a[i])
		eb, err2 := expr.Marshal(byte(f.nft()), b[i])
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
func iptSaveString(s string) string {
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
