package iptnft

import (
	"encoding/binary"
	"errors"
	"net"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"

	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// errNotNFTReady sends setupNFT's caller the restore way; withNFT keeps
// the connection for it only on success, which costs one reopen on a
// path that then starts a process anyway.
var ErrNotNFTReady = errors.New("nat table not as iptables-nft makes it")

// iptablesPostrouting reports whether f's nat table has the POSTROUTING
// chain iptables-nft makes: a nat chain on the postrouting hook at
// priority 100 (srcnat). A table made otherwise (by nft, say) is left to
// iptables-restore, which refuses what it cannot use.
func IptablesPostrouting(c *nftnl.NftConn, f nftnl.Family) bool {
	ch, err := c.ListChain(&nftables.Table{Name: "nat", Family: f.Nft()}, "POSTROUTING")
	if err != nil || ch.Hooknum == nil || ch.Priority == nil {
		return false
	}
	return *ch.Hooknum == *nftables.ChainHookPostrouting &&
		*ch.Priority == *nftables.ChainPriorityNATSource && ch.Type == nftables.ChainTypeNAT
}

func ParseCIDR(s string) *net.IPNet {
	ip, n, err := net.ParseCIDR(s)
	if err != nil {
		return nil
	}
	if v4 := ip.To4(); v4 != nil {
		n.IP = n.IP.To4()
	}
	return n
}

// iptRuleExprs is an iptables-nft rule: its address matches, the comment
// match (the xt "comment" match, rev 0), a counter, and the target, if any.
func IptRuleExprs(matches []expr.Any, comment string, target expr.Any) []expr.Any {
	c := xt.Comment(comment)
	e := append(matches, &expr.Match{Name: "comment", Rev: 0, Info: &c}, &expr.Counter{})
	if target != nil {
		e = append(e, target)
	}
	return e
}

// iptAddrMatch is "-s p" (dst false) or "-d p" ("! -d p" with neq), as
// iptables-nft encodes it: a prefix that ends inside a byte loads the
// whole address through a bitwise mask, which is matchAddr's encoding of
// our own rules; one that ends on a byte boundary loads only its whole
// bytes and compares them. A /0 prefix, which iptables drops from the
// rule, answers false.
func IptAddrMatch(f nftnl.Family, dst bool, p *net.IPNet, neq bool) ([]expr.Any, bool) {
	if p == nil || len(p.IP) != int(nftnl.AddrField[f].Len) || len(p.Mask) != len(p.IP) {
		return nil, false
	}
	ones, _ := p.Mask.Size()
	if ones == 0 { // also a mask that is not a prefix
		return nil, false
	}
	op := expr.CmpOpEq
	if neq {
		op = expr.CmpOpNeq
	}
	if ones%8 != 0 {
		return nftnl.MatchAddr(f, !dst, op, p), true
	}
	off := nftnl.AddrField[f].Saddr
	if dst {
		off = nftnl.AddrField[f].Daddr
	}
	n := uint32(ones / 8)
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n},
		&expr.Cmp{Op: op, Register: 1, Data: p.IP.Mask(p.Mask)[:n]},
	}, true
}

// masqueradeTarget is "-j MASQUERADE" as iptables-nft writes it: the xt
// target, rev 0, with an empty range. IPv4's info is struct
// nf_nat_ipv4_multi_range_compat (rangesize 1, then one 20-byte range);
// IPv6's is struct nf_nat_range (40 bytes), all zero.
func MasqueradeTarget(f nftnl.Family) *expr.Target {
	var info xt.Unknown
	if f == nftnl.IPv6 {
		info = make(xt.Unknown, 40)
	} else {
		info = make(xt.Unknown, 24)
		binary.NativeEndian.PutUint32(info, 1)
	}
	return &expr.Target{Name: "MASQUERADE", Rev: 0, Info: &info}
}
