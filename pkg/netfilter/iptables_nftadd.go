package netfilter

import (
	"encoding/binary"
	"errors"
	"net"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
)

// setupNFT is setupFamily's short way for iptables-nft: the nat table and
// its POSTROUTING chain exist, as iptables-nft made them, and the
// attachment's chain does not. That is every ADD on a node but its first
// and a repeated one. It then writes, in one batch over the process's
// nftables connection, what freshLines has iptables-restore write: the
// chain, its rules and the POSTROUTING jumps, each rule encoded
// expression for expression as iptables-nft encodes it (iptRuleExprs). So
// iptables-save prints them as iptables-restore's own, iptables -C and -D
// find them by their spec (upstream's DEL deletes the jumps that way), and
// no process is started.
//
// Anything else answers done=false and the caller runs the restore:
// another table layout, an address whose rule iptables would print
// differently (a /0 prefix), a failed read, or a batch the kernel refuses.
// A refused batch changed nothing (nf_tables applies a batch whole); one
// that went through but whose answer was lost leaves the chain there,
// which the restore's "-N" then meets, and the merge that follows finds
// nothing to change.
func (m *iptablesMasq) setupNFT(f family, want iptablesRules) (done bool) {
	if m.noNFT || !m.isNFTVariant(f) {
		return false
	}
	rules, ok := want.nftRules(f)
	if !ok {
		return false
	}
	err := withNFT(func(c *nftConn) error {
		if !iptablesPostrouting(c, f) {
			return errNotNFTReady
		}
		if there, err := nftChainExistsIn(c.nl, f.nft(), "nat", want.chain); err != nil || there {
			return errNotNFTReady
		}
		table := &nftables.Table{Name: "nat", Family: f.nft()}
		chain := c.AddChain(&nftables.Chain{Name: want.chain, Table: table})
		post := &nftables.Chain{Name: "POSTROUTING", Table: table}
		for _, r := range rules.own {
			c.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: r})
		}
		for _, r := range rules.jumps {
			c.AddRule(&nftables.Rule{Table: table, Chain: post, Exprs: r})
		}
		return c.Flush()
	})
	return err == nil
}

// errNotNFTReady sends setupNFT's caller the restore way; withNFT keeps
// the connection for it only on success, which costs one reopen on a
// path that then starts a process anyway.
var errNotNFTReady = errors.New("nat table not as iptables-nft makes it")

// iptablesPostrouting reports whether f's nat table has the POSTROUTING
// chain iptables-nft makes: a nat chain on the postrouting hook at
// priority 100 (srcnat). A table made otherwise (by nft, say) is left to
// iptables-restore, which refuses what it cannot use.
func iptablesPostrouting(c *nftConn, f family) bool {
	ch, err := c.ListChain(&nftables.Table{Name: "nat", Family: f.nft()}, "POSTROUTING")
	if err != nil || ch.Hooknum == nil || ch.Priority == nil {
		return false
	}
	return *ch.Hooknum == *nftables.ChainHookPostrouting &&
		*ch.Priority == *nftables.ChainPriorityNATSource && ch.Type == nftables.ChainTypeNAT
}

// nftIPTRules are the expressions of an attachment's fresh rules: the
// chain's own (markers, ACCEPTs, MASQUERADE) and the POSTROUTING jumps,
// in freshLines' order.
type nftIPTRules struct {
	own, jumps [][]expr.Any
}

// nftRules encodes r as iptables-nft would: false when one of its
// addresses has a prefix iptables prints otherwise than it reads (/0).
func (r iptablesRules) nftRules(f family) (nftIPTRules, bool) {
	var out nftIPTRules
	var subnets, hosts []*net.IPNet
	seen := map[string]bool{}
	for _, mk := range r.markers {
		host, subnet := parseCIDR(mk.host), parseCIDR(mk.subnet)
		if host == nil || subnet == nil {
			return out, false
		}
		src, ok1 := iptAddrMatch(f, false, host, false)
		dst, ok2 := iptAddrMatch(f, true, subnet, false)
		if !ok1 || !ok2 {
			return out, false
		}
		out.own = append(out.own, iptRuleExprs(append(src, dst...), r.markerComment, nil))
		if !seen["s"+subnet.String()] {
			seen["s"+subnet.String()] = true
			subnets = append(subnets, subnet)
		}
		if !seen["h"+host.String()] {
			seen["h"+host.String()] = true
			hosts = append(hosts, host)
		}
	}
	if len(subnets) != len(r.accepts) || len(hosts) != len(r.jumps) {
		return out, false // not the layout desiredIPTables makes
	}
	for _, s := range subnets {
		dst, _ := iptAddrMatch(f, true, s, false)
		out.own = append(out.own, iptRuleExprs(dst, r.comment, &expr.Verdict{Kind: expr.VerdictAccept}))
	}
	mc, ok := iptAddrMatch(f, true, parseCIDR(multicast[f]), true)
	if !ok {
		return out, false
	}
	out.own = append(out.own, iptRuleExprs(mc, r.comment, masqueradeTarget(f)))
	for _, h := range hosts {
		src, _ := iptAddrMatch(f, false, h, false)
		out.jumps = append(out.jumps, iptRuleExprs(src, r.comment, &expr.Verdict{Kind: expr.VerdictJump, Chain: r.chain}))
	}
	return out, true
}

func parseCIDR(s string) *net.IPNet {
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
func iptRuleExprs(matches []expr.Any, comment string, target expr.Any) []expr.Any {
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
func iptAddrMatch(f family, dst bool, p *net.IPNet, neq bool) ([]expr.Any, bool) {
	if p == nil || len(p.IP) != int(addrField[f].len) || len(p.Mask) != len(p.IP) {
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
		return matchAddr(f, !dst, op, p), true
	}
	off := addrField[f].saddr
	if dst {
		off = addrField[f].daddr
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
func masqueradeTarget(f family) *expr.Target {
	var info xt.Unknown
	if f == ipv6 {
		info = make(xt.Unknown, 40)
	} else {
		info = make(xt.Unknown, 24)
		binary.NativeEndian.PutUint32(info, 1)
	}
	return &expr.Target{Name: "MASQUERADE", Rev: 0, Info: &info}
}
