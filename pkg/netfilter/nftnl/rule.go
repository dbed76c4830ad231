package nftnl

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

// nftRule is a rule as data: its expressions and its comment.
type NftRule struct {
	Exprs   []expr.Any
	Comment string
}

func (r NftRule) UserData() []byte {
	if r.Comment == "" {
		return nil
	}
	return userdata.AppendString(nil, userdata.TypeComment, r.Comment)
}

func NftRuleFrom(k *nftables.Rule) NftRule {
	c, _ := userdata.GetString(k.UserData, userdata.TypeComment)
	return NftRule{Exprs: k.Exprs, Comment: c}
}

// String renders r the way `nft list` prints it, which is how Check compares
// desired with kernel rules and how tests state expectations.
func (r NftRule) String() string {
	s := RenderExprs(r.Exprs)
	if r.Comment != "" {
		s += fmt.Sprintf(" comment %q", r.Comment)
	}
	return s
}

// Offsets of the address fields in the IPv4 and IPv6 headers. This and
// the other family-indexed tables are arrays, not maps: an array of
// constants is data in the binary, a map is built by code at init, in
// every exec of the multicall binary.
var AddrField = [...]struct{ Saddr, Daddr, Len uint32 }{
	IPv4: {Saddr: 12, Daddr: 16, Len: 4},
	IPv6: {Saddr: 8, Daddr: 24, Len: 16},
}

var nfproto = [...]byte{IPv4: unix.NFPROTO_IPV4, IPv6: unix.NFPROTO_IPV6}

// matchAddr loads the source or destination address of f into register 1
// and compares it with n (a prefix compare when n is not a host address).
// The nfproto match comes first because the table is inet: without it an
// IPv6 packet would be read at IPv4 offsets.
func MatchAddr(f Family, src bool, op expr.CmpOp, n *net.IPNet) []expr.Any {
	off := AddrField[f].Daddr
	if src {
		off = AddrField[f].Saddr
	}
	ip := n.IP.To4()
	if f == IPv6 {
		ip = n.IP.To16()
	}
	e := []expr.Any{&expr.Payload{
		OperationType: expr.PayloadLoad,
		DestRegister:  1,
		Base:          expr.PayloadBaseNetworkHeader,
		Offset:        off,
		Len:           AddrField[f].Len,
	}}
	if ones, bits := n.Mask.Size(); ones != bits {
		e = append(e, &expr.Bitwise{
			SourceRegister: 1,
			DestRegister:   1,
			Len:            AddrField[f].Len,
			Mask:           []byte(n.Mask),
			Xor:            make([]byte, AddrField[f].Len),
		})
	}
	return append(e, &expr.Cmp{Op: op, Register: 1, Data: []byte(ip.Mask(n.Mask))})
}

func MatchFamily(f Family) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{nfproto[f]}},
	}
}

func MustCIDR(s string) *net.IPNet {
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
func RenderExprs(es []expr.Any) string {
	var (
		out    []string
		regs   = map[uint32]string{} // register -> what it holds
		isAddr = map[uint32]bool{}
		masks  = map[uint32][]byte{}
		loaded = map[uint32]uint32{} // register -> bytes of the address loaded
		curFam *Family
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
					f := IPv4
					curFam = &f
					continue
				case unix.NFPROTO_IPV6:
					f := IPv6
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
func payloadName(f *Family, p *expr.Payload) string {
	if f == nil || p.OperationType != expr.PayloadLoad || p.Base != expr.PayloadBaseNetworkHeader ||
		p.Len == 0 || p.Len > AddrField[*f].Len {
		return ""
	}
	proto := map[Family]string{IPv4: "ip", IPv6: "ip6"}[*f]
	switch p.Offset {
	case AddrField[*f].Saddr:
		return proto + " saddr"
	case AddrField[*f].Daddr:
		return proto + " daddr"
	}
	return ""
}

// addrPrefix renders the compare of the leading len(data) bytes of an
// address of f with data, after mask (nil for none), the way nft prints it:
// "10.1.0.5" for a whole address, "10.1.0.0/24" for a prefix. ok is false
// when the match is not a prefix (a mask that is not one, bits set past
// it), which the caller then prints raw.
func addrPrefix(f Family, data, mask []byte) (string, bool) {
	full := int(AddrField[f].Len)
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
