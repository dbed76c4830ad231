package forward

import (
	"bytes"
	"net"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/iptnft"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// checkNFT is the firewall's iptables Check for one family of
// iptables-nft, without iptables-save: it reads FORWARD and CNI-FORWARD
// (and the isolation chains the policy uses) over netlink, in one
// generation, and looks for each rule Check wants encoded exactly as
// iptables-nft encodes its spec (fwdWant). It answers true only when
// iptables-save would have shown them all, in the order Check asks for;
// anything else (a rule missing or encoded otherwise, a table iptables-nft
// did not make, a failed read) answers false, and Check reads with
// iptables-save, which names what is missing.
func (m *iptablesForward) checkNFT(r ForwardRules, f nftnl.Family, ips []net.IP) bool {
	if m.ipt.NoNFT || !m.ipt.IsNFTVariant(f) {
		return false
	}
	want, ok := r.fwdWant(f, ips)
	if !ok {
		return false
	}
	chains := []string{"FORWARD", fwdChain}
	iso := r.Policy == IngressSameBridge || r.Policy == IngressIsolated
	if iso {
		chains = append(chains, isoStage1, isoStage2)
	}
	var got map[string][]*nftables.Rule
	err := nftnl.WithNFT(func(c *nftnl.NftConn) error {
		table := &nftables.Table{Name: "filter", Family: f.Nft()}
		ch, err := c.ListChain(table, "FORWARD")
		if err != nil || ch.Hooknum == nil || ch.Priority == nil || ch.Type != nftables.ChainTypeFilter ||
			*ch.Hooknum != *nftables.ChainHookForward || *ch.Priority != *nftables.ChainPriorityFilter {
			return iptnft.ErrNotNFTReady
		}
		// Of CNI-FORWARD (two rules per pod) only the first, which must
		// be the admin jump, and the rules holding one of our
		// addresses: each address rule Check wants compares with one.
		var addrs [][]byte
		for _, ip := range ips {
			if p := iptnft.ParseCIDR(hostPrefix(ip)); p != nil {
				addrs = append(addrs, p.IP)
			}
		}
		ours := func(i int, data []byte) bool {
			return i == 0 || slices.ContainsFunc(addrs, func(a []byte) bool { return bytes.Contains(data, a) })
		}
		got, err = nftnl.ConsistentOn(c.Nl, func() (map[string][]*nftables.Rule, error) {
			out := map[string][]*nftables.Rule{}
			for _, name := range chains {
				var rs []*nftables.Rule
				var err error
				if name == fwdChain {
					rs, err = nftnl.RulesWhere(c, table, name, ours)
				} else {
					rs, err = c.GetRules(table, &nftables.Chain{Name: name})
				}
				if err != nil {
					return nil, err
				}
				out[name] = rs
			}
			return out, nil
		})
		return err
	})
	if err != nil {
		return false
	}
	index := func(chain string, e []expr.Any) int {
		for i, rule := range got[chain] {
			if iptnft.SameExprs(f, rule.Exprs, e) {
				return i
			}
		}
		return -1
	}
	if index("FORWARD", want.jump) < 0 {
		return false
	}
	if fw := got[fwdChain]; len(fw) == 0 || !iptnft.SameExprs(f, fw[0].Exprs, want.admin) {
		return false
	}
	for _, pair := range want.addrs {
		if index(fwdChain, pair[0]) < 0 && index(fwdChain, pair[1]) < 0 {
			return false
		}
	}
	if !iso {
		return true
	}
	i := index("FORWARD", want.isoJump)
	if i < 0 {
		return false
	}
	// iptables-save prints a rule "-j CNI-FORWARD" only for a jump to it:
	// with none before the isolation jump, Check finds that jump first.
	for _, rule := range got["FORWARD"][:i] {
		for _, e := range rule.Exprs {
			if v, ok := e.(*expr.Verdict); ok && v.Chain == fwdChain {
				return false
			}
		}
	}
	for _, e := range want.stage1 {
		if index(isoStage1, e) < 0 {
			return false
		}
	}
	return index(isoStage2, want.stage2) >= 0
}

// fwdWanted is what the firewall's Check looks for, as iptables-nft
// encodes the specs that missing names.
type fwdWanted struct {
	jump, admin, isoJump, stage2 []expr.Any
	// addrs: per address and rule, ours and upstream's (either will do).
	addrs  [][2][]expr.Any
	stage1 [][]expr.Any
}

// fwdWant encodes the specs of fwdJumpSpec, fwdAdminSpec, fwdOwnSpecs,
// fwdUpstreamSpecs, isoJumpSpec, isoStage1Specs and isoStage2Spec as
// iptables-nft writes them: matches in the order iptables-save prints
// them (interfaces, addresses, conntrack, comment), a counter, the verdict.
func (r ForwardRules) fwdWant(f nftnl.Family, ips []net.IP) (fwdWanted, bool) {
	rule := func(comment string, verdict *expr.Verdict, matches ...expr.Any) []expr.Any {
		matches = slices.Clone(matches) // the callers share theirs between rules
		if comment != "" {
			return iptnft.IptRuleExprs(matches, comment, verdict)
		}
		return append(matches, &expr.Counter{}, verdict)
	}
	jump := func(chain string) *expr.Verdict { return &expr.Verdict{Kind: expr.VerdictJump, Chain: chain} }
	accept := &expr.Verdict{Kind: expr.VerdictAccept}
	drop := &expr.Verdict{Kind: expr.VerdictDrop}
	w := fwdWanted{
		jump:    rule("CNI firewall plugin rules", jump(fwdChain)),
		admin:   rule("CNI firewall plugin admin overrides", jump(r.admin())),
		isoJump: rule("CNI firewall plugin rules (ingressPolicy: "+string(r.Policy)+")", jump(isoStage1)),
	}
	own := netfilter.IptablesMarkerComment(r.Owner)
	for _, ip := range ips {
		host := iptnft.ParseCIDR(hostPrefix(ip))
		src, ok1 := iptnft.IptAddrMatch(f, false, host, false)
		dst, ok2 := iptnft.IptAddrMatch(f, true, host, false)
		if !ok1 || !ok2 {
			return w, false
		}
		established := append(dst, ctStateRelatedEstablished())
		w.addrs = append(w.addrs,
			[2][]expr.Any{rule(own, accept, established...), rule("", accept, established...)},
			[2][]expr.Any{rule(own, accept, src...), rule("", accept, src...)})
	}
	br := r.Bridge
	if r.Policy == IngressIsolated {
		w.stage1 = append(w.stage1, rule("", drop, append(ifMatch(expr.MetaKeyIIFNAME, br, false), ifMatch(expr.MetaKeyOIFNAME, br, false)...)...))
	}
	w.stage1 = append(w.stage1, rule("", jump(isoStage2), append(ifMatch(expr.MetaKeyIIFNAME, br, false), ifMatch(expr.MetaKeyOIFNAME, br, true)...)...))
	w.stage2 = rule("", drop, ifMatch(expr.MetaKeyOIFNAME, br, false)...)
	return w, true
}

// ctStateRelatedEstablished is "-m conntrack --ctstate
// RELATED,ESTABLISHED": the xt conntrack match, rev 3, matching on state
// alone (XT_CONNTRACK_STATE), whose mask has the bits of ESTABLISHED (1<<1)
// and RELATED (1<<2).
func ctStateRelatedEstablished() *expr.Match {
	return &expr.Match{Name: "conntrack", Rev: 3, Info: &xt.ConntrackMtinfo3{
		ConntrackMtinfo2: xt.ConntrackMtinfo2{
			ConntrackMtinfoBase: xt.ConntrackMtinfoBase{MatchFlags: uint16(xt.ConntrackState)},
			StateMask:           1<<1 | 1<<2,
		},
	}}
}

// ifMatch is "-i name" (key iifname) or "[!] -o name" as iptables-nft
// writes it: the name with its terminating NUL.
func ifMatch(key expr.MetaKey, name string, neq bool) []expr.Any {
	op := expr.CmpOpEq
	if neq {
		op = expr.CmpOpNeq
	}
	return []expr.Any{
		&expr.Meta{Key: key, Register: 1},
		&expr.Cmp{Op: op, Register: 1, Data: append([]byte(name), 0)},
	}
}
