package masq

import (
	"net"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/cniforge/plugins/pkg/netfilter/iptnft"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
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
func (m *iptablesMasq) setupNFT(f nftnl.Family, want iptablesRules) (done bool) {
	if m.NoNFT || !m.IsNFTVariant(f) {
		return false
	}
	rules, ok := want.nftRules(f)
	if !ok {
		return false
	}
	err := nftnl.WithNFT(func(c *nftnl.NftConn) error {
		if !iptnft.IptablesPostrouting(c, f) {
			return iptnft.ErrNotNFTReady
		}
		if there, err := nftnl.NftChainExistsIn(c.Nl, f.Nft(), "nat", want.chain); err != nil || there {
			return iptnft.ErrNotNFTReady
		}
		table := &nftables.Table{Name: "nat", Family: f.Nft()}
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

// nftIPTRules are the expressions of an attachment's fresh rules: the
// chain's own (markers, ACCEPTs, MASQUERADE) and the POSTROUTING jumps,
// in freshLines' order.
type nftIPTRules struct {
	own, jumps [][]expr.Any
}

// nftRules encodes r as iptables-nft would: false when one of its
// addresses has a prefix iptables prints otherwise than it reads (/0).
func (r iptablesRules) nftRules(f nftnl.Family) (nftIPTRules, bool) {
	var out nftIPTRules
	var subnets, hosts []*net.IPNet
	seen := map[string]bool{}
	for _, mk := range r.markers {
		host, subnet := iptnft.ParseCIDR(mk.host), iptnft.ParseCIDR(mk.subnet)
		if host == nil || subnet == nil {
			return out, false
		}
		src, ok1 := iptnft.IptAddrMatch(f, false, host, false)
		dst, ok2 := iptnft.IptAddrMatch(f, true, subnet, false)
		if !ok1 || !ok2 {
			return out, false
		}
		out.own = append(out.own, iptnft.IptRuleExprs(append(src, dst...), r.markerComment, nil))
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
		dst, _ := iptnft.IptAddrMatch(f, true, s, false)
		out.own = append(out.own, iptnft.IptRuleExprs(dst, r.comment, &expr.Verdict{Kind: expr.VerdictAccept}))
	}
	mc, ok := iptnft.IptAddrMatch(f, true, iptnft.ParseCIDR(multicast[f]), true)
	if !ok {
		return out, false
	}
	out.own = append(out.own, iptnft.IptRuleExprs(mc, r.comment, iptnft.MasqueradeTarget(f)))
	for _, h := range hosts {
		src, _ := iptnft.IptAddrMatch(f, false, h, false)
		out.jumps = append(out.jumps, iptnft.IptRuleExprs(src, r.comment, &expr.Verdict{Kind: expr.VerdictJump, Chain: r.chain}))
	}
	return out, true
}
