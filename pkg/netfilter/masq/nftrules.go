package masq

import (
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
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

// nftBaseRules is the fixed content of the base chain.
func nftBaseRules() []nftnl.NftRule {
	var rs []nftnl.NftRule
	for _, f := range nftnl.Families {
		e := append(nftnl.MatchFamily(f), nftnl.MatchAddr(f, false, expr.CmpOpEq, nftnl.MustCIDR(multicast[f]))...)
		rs = append(rs, nftnl.NftRule{Exprs: append(e, &expr.Verdict{Kind: expr.VerdictReturn})})
	}
	return append(rs, nftnl.NftRule{Exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictGoto, Chain: nftMasqChain}}})
}

// nftMasqRules returns the rules of o in the masquerade chain: per address,
// traffic from it to anywhere outside its subnet is masqueraded (multicast
// already returned in the base chain).
//
// A destination in exclude (of the address's family) is not masqueraded
// either: a rule per address and excluded CIDR, before its masquerade
// rule, returns (ip saddr 10.1.0.5 ip daddr 10.88.0.0/16 return). It
// carries o's comment, so Teardown, GC and upstream's DEL remove it with
// the masquerade rule.
func nftMasqRules(o netfilter.Owner, addrs []*net.IPNet, exclude ...*net.IPNet) []nftnl.NftRule {
	var rs []nftnl.NftRule
	seen := map[string]bool{}
	add := func(r nftnl.NftRule) {
		if !seen[r.String()] {
			seen[r.String()] = true
			rs = append(rs, r)
		}
	}
	for _, a := range addrs {
		if a == nil || a.IP == nil {
			continue
		}
		f := nftnl.FamilyOf(a.IP)
		src := append(nftnl.MatchFamily(f), nftnl.MatchAddr(f, true, expr.CmpOpEq, nftnl.HostAddr(a))...)
		for _, x := range exclude {
			if x == nil || nftnl.FamilyOf(x.IP) != f {
				continue
			}
			e := append(slices.Clone(src), nftnl.MatchAddr(f, false, expr.CmpOpEq, nftnl.SubnetOf(x))...)
			add(nftnl.NftRule{Exprs: append(e, &expr.Verdict{Kind: expr.VerdictReturn}), Comment: netfilter.NftComment(o)})
		}
		e := append(slices.Clone(src), nftnl.MatchAddr(f, false, expr.CmpOpNeq, nftnl.SubnetOf(a))...)
		add(nftnl.NftRule{Exprs: append(e, &expr.Masq{}), Comment: netfilter.NftComment(o)})
	}
	return rs
}

// renderNFTables returns the table Setup builds on an empty ruleset for
// (o, addrs), in the format of `nft list table inet cni_plugins_masquerade`.
func renderNFTables(o netfilter.Owner, addrs []*net.IPNet) string {
	return renderNFTTable(nftBaseRules(), nftMasqRules(o, addrs))
}

func renderNFTTable(base, masq []nftnl.NftRule) string {
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
