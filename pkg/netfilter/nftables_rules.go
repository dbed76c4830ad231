package netfilter

import (
	"bytes"
	"fmt"
	"net"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

// The nftables layout is upstream's, so both suites share one table without
// undoing each other: the base chain sends everything but multicast to a
// regular chain holding one masquerade rule per container address.
//
//	table inet cni_plugins_masquerade {
//		chain postrouting {
//			type nat hook postrouting priority srcnat; policy accept;
//			ip daddr 224.0.0.0/4 return
//			ip6 daddr ff00::/8 return
//			goto masq_checks
//		}
//		chain masq_checks {
//			ip saddr 10.1.0.5 ip daddr != 10.1.0.0/24 masquerade comment "<nftComment>"
//		}
//	}
const (
	nftTableName = "cni_plugins_masquerade"
	nftBaseChain = "postrouting"
	nftMasqChain = "masq_checks"
)

var nftTable = &nftables.Table{Name: nftTableName, Family: nftables.TableFamilyINet}

func nftBase() *nftables.Chain {
	return &nftables.Chain{
		Name:     nftBaseChain,
		Table:    nftTable,
		Type:     nftables.ChainTypeNAT,
		Hooknum:  nftables.ChainHookPostrouting,
		Priority: nftables.ChainPriorityNATSource,
	}
}

func nftMasq() *nftables.Chain {
	return &nftables.Chain{Name: nftMasqChain, Table: nftTable}
}

// nftRule is a rule as data: its expressions and its comment.
type nftRule struct {
	exprs   []expr.Any
	comment string
}

func (r nftRule) userData() []byte {
	if r.comment == "" {
		return nil
	}
	return userdata.AppendString(nil, userdata.TypeComment, r.comment)
}

func nftRuleFrom(k *nftables.Rule) nftRule {
	c, _ := userdata.GetString(k.UserData, userdata.TypeComment)
	return nftRule{exprs: k.Exprs, comment: c}
}

// String renders r the way `nft list` prints it, which is how Check compares
// desired with kernel rules and how tests state expectations.
func (r nftRule) String() string {
	s := renderExprs(r.exprs)
	if r.comment != "" {
		s += fmt.Sprintf(" comment %q", r.comment)
	}
	return s
}

// Offsets of the address fields in the IPv4 and IPv6 headers. This and
// the other family-indexed tables are arrays, not maps: an array of
// constants is data in the binary, a map is built by code at init, in
// every exec of the multicall binary.
var addrField = [...]struct{ saddr, daddr, len uint32 }{
	ipv4: {saddr: 12, daddr: 16, len: 4},
	ipv6: {saddr: 8, daddr: 24, len: 16},
}

var nfproto = [...]byte{ipv4: unix.NFPROTO_IPV4, ipv6: unix.NFPROTO_IPV6}

// matchAddr loads the source or destination address of f into register 1
// and compares it with n (a prefix compare when n is not a host address).
// The nfproto match comes first because the table is inet: without it an
// IPv6 packet would be read at IPv4 offsets.
func matchAddr(f family, src bool, op expr.CmpOp, n *net.IPNet) []expr.Any {
	off := addrField[f].daddr
	if src {
		off = addrField[f].saddr
	}
	ip := n.IP.To4()
	if f == ipv6 {
		ip = n.IP.To16()
	}
	e := []expr.Any{&expr.Payload{
		OperationType: expr.PayloadLoad,
		DestRegister:  1,
		Base:          expr.PayloadBaseNetworkHeader,
		Offset:        off,
		Len:           addrField[f].len,
	}}
	if ones, bits := n.Mask.Size(); ones != bits {
		e = append(e, &expr.Bitwise{
			SourceRegister: 1,
			DestRegister:   1,
			Len:            addrField[f].len,
			Mask:           []byte(n.Mask),
			Xor:            make([]byte, addrField[f].len),
		})
	}
	return append(e, &expr.Cmp{Op: op, Register: 1, Data: []byte(ip.Mask(n.Mask))})
}

func matchFamily(f family) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{nfproto[f]}},
	}
}

func mustCIDR(s string) *net.IPNet {
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	if n.IP.To4() != nil {
		n.IP = n.IP.To4()
		n.Mask = n.Mask[len(n.Mask)-4:]
	}
	return n
}

// nftBaseRules is the fixed content of the base chain.
func nftBaseRules() []nftRule {
	var rs []nftRule
	for _, f := range families {
		e := append(matchFamily(f), matchAddr(f, false, expr.CmpOpEq, mustCIDR(multicast[f]))...)
		rs = append(rs, nftRule{exprs: append(e, &expr.Verdict{Kind: expr.VerdictReturn})})
	}
	return append(rs, nftRule{exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictGoto, Chain: nftMasqChain}}})
}

// nftMasqRules returns the rules of o in the masquerade chain: per address,
// traffic from it to anywhere outside its subnet is masqueraded (multicast
// already returned in the base chain).
func nftMasqRules(o Owner, addrs []*net.IPNet) []nftRule {
	var rs []nftRule
	seen := map[string]bool{}
	for _, a := range addrs {
		if a == nil || a.IP == nil {
			continue
		}
		f := familyOf(a.IP)
		e := append(matchFamily(f), matchAddr(f, true, expr.CmpOpEq, hostAddr(a))...)
		e = append(e, matchAddr(f, false, expr.CmpOpNeq, subnetOf(a))...)
		r := nftRule{exprs: append(e, &expr.Masq{}), comment: nftComment(o)}
		if !seen[r.String()] {
			seen[r.String()] = true
			rs = append(rs, r)
		}
	}
	return rs
}

// renderNFTables returns the table Setup builds on an empty ruleset for
// (o, addrs), in the format of `nft list table inet cni_plugins_masquerade`.
func renderNFTables(o Owner, addrs []*net.IPNet) string {
	return renderNFTTable(nftBaseRules(), nftMasqRules(o, addrs))
}

func renderNFTTable(base, masq []nftRule) string {
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s {\n", nftTableName)
	fmt.Fprintf(&b, "\tchain %s {\n\t\ttype nat hook postrouting priority srcnat; policy accept;\n", nftBaseChain)
	for _, r := range base {
		fmt.Fprintf(&b, "\t\t%s\n", r)
	}
	fmt.Fprintf(&b, "\t}\n\n\tchain %s {\n", nftMasqChain)
	for _, r := range masq {
		fmt.Fprintf(&b, "\t\t%s\n", r)
	}
	b.WriteString("\t}\n}\n")
	return b.String()
}

// renderExprs prints the expressions this package makes in nft's syntax;
// anything else is printed as its Go value, so an unknown rule never renders
// like one of ours. The family dependency (meta nfproto) is folded into the
// following "ip"/"ip6" match as nft does.
//
// Equivalent address matches render alike, whoever compiled them: this
// package loads the whole address and masks it, while nft loads only the
// prefix's bytes (ip6 daddr ff00::/8 is a 1-byte load, ip daddr 10.1.0.0/24
// a 3-byte one) and masks only a prefix that ends inside a byte. A load of
// L bytes from the start of an address field is a /L*8 prefix, narrowed by
// a mask over it.
func renderExprs(es []expr.Any) string {
	var (
		out    []string
		regs   = map[uint32]string{} // register -> what it holds
		isAddr = map[uint32]bool{}
		masks  = map[uint32][]byte{}
		loaded = map[uint32]uint32{} // register -> bytes of the address loaded
		curFam *family
	)
	for _, e := range es {
		switch e := e.(type) {
		case *expr.Meta:
			if e.Key == expr.MetaKeyNFPROTO && !e.SourceRegister {
				regs[e.Register] = "meta nfproto"
				isAddr[e.Register] = false
				delete(masks, e.Register)
				continue
			}
			out = append(out, fmt.Sprintf("%#v", *e))
		case *expr.Payload:
			name := payloadName(curFam, e)
			if name == "" {
				out = append(out, fmt.Sprintf("%#v", *e))
				continue
			}
			regs[e.DestRegister] = name
			isAddr[e.DestRegister] = true
			loaded[e.DestRegister] = e.Len
			delete(masks, e.DestRegister)
		case *expr.Bitwise:
			if e.SourceRegister != e.DestRegister || !isAddr[e.SourceRegister] || e.Len != loaded[e.SourceRegister] ||
				len(e.Mask) != int(e.Len) || !bytes.Equal(e.Xor, make([]byte, len(e.Xor))) {
				out = append(out, fmt.Sprintf("%#v", *e))
				continue
			}
			masks[e.DestRegister] = e.Mask
		case *expr.Cmp:
			lhs, ok := regs[e.Register]
			if !ok {
				out = append(out, fmt.Sprintf("%#v", *e))
				continue
			}
			if lhs == "meta nfproto" && e.Op == expr.CmpOpEq && len(e.Data) == 1 {
				switch e.Data[0] {
				case unix.NFPROTO_IPV4:
					f := ipv4
					curFam = &f
					continue
				case unix.NFPROTO_IPV6:
					f := ipv6
					curFam = &f
					continue
				}
			}
			rhs := fmt.Sprintf("%x", e.Data)
			if isAddr[e.Register] && curFam != nil {
				r, ok := addrPrefix(*curFam, e.Data, masks[e.Register])
				ok = ok && len(e.Data) == int(loaded[e.Register])
				if !ok {
					out = append(out, fmt.Sprintf("%#v", *e))
					continue
				}
				rhs = r
			}
			op := map[expr.CmpOp]string{expr.CmpOpEq: "", expr.CmpOpNeq: "!= ", expr.CmpOpLt: "< ",
				expr.CmpOpLte: "<= ", expr.CmpOpGt: "> ", expr.CmpOpGte: ">= "}[e.Op]
			out = append(out, fmt.Sprintf("%s %s%s", lhs, op, rhs))
		case *expr.Masq:
			if *e != (expr.Masq{}) {
				out = append(out, fmt.Sprintf("%#v", *e))
				continue
			}
			out = append(out, "masquerade")
		case *expr.Verdict:
			switch e.Kind {
			case expr.VerdictReturn:
				out = append(out, "return")
			case expr.VerdictGoto:
				out = append(out, "goto "+e.Chain)
			case expr.VerdictJump:
				out = append(out, "jump "+e.Chain)
			case expr.VerdictAccept:
				out = append(out, "accept")
			case expr.VerdictDrop:
				out = append(out, "drop")
			default:
				out = append(out, fmt.Sprintf("%#v", *e))
			}
		default:
			out = append(out, fmt.Sprintf("%T%+v", e, e))
		}
	}
	return strings.Join(out, " ")
}

// payloadName names a load of the leading bytes (at least one, at most all)
// of an address of the family matched before it.
func payloadName(f *family, p *expr.Payload) string {
	if f == nil || p.OperationType != expr.PayloadLoad || p.Base != expr.PayloadBaseNetworkHeader ||
		p.Len == 0 || p.Len > addrField[*f].len {
		return ""
	}
	proto := map[family]string{ipv4: "ip", ipv6: "ip6"}[*f]
	switch p.Offset {
	case addrField[*f].saddr:
		return proto + " saddr"
	case addrField[*f].daddr:
		return proto + " daddr"
	}
	return ""
}

// addrPrefix renders the compare of the leading len(data) bytes of an
// address of f with data, after mask (nil for none), the way nft prints it:
// "10.1.0.5" for a whole address, "10.1.0.0/24" for a prefix. ok is false
// when the match is not a prefix (a mask that is not one, bits set past
// it), which the caller then prints raw.
func addrPrefix(f family, data, mask []byte) (string, bool) {
	full := int(addrField[f].len)
	if len(data) == 0 || len(data) > full || (mask != nil && len(mask) != len(data)) {
		return "", false
	}
	ones := len(data) * 8
	if mask != nil {
		var bits int
		if ones, bits = net.IPMask(mask).Size(); bits == 0 {
			return "", false // not a prefix mask
		}
	}
	ip := make(net.IP, full)
	copy(ip, data)
	m := net.CIDRMask(ones, full*8)
	if !ip.Mask(m).Equal(ip) {
		return "", false // bits past the prefix can never match
	}
	if ones == full*8 {
		return ip.String(), true
	}
	return fmt.Sprintf("%s/%d", ip, ones), true
}
