package masq

import (
	"github.com/google/nftables"

	"github.com/cniforge/plugins/pkg/netfilter/iptnft"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
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
func (m *iptablesMasq) checkNFT(f nftnl.Family, want iptablesRules) bool {
	if m.NoNFT || !m.IsNFTVariant(f) {
		return false
	}
	type view struct{ post, own []*nftables.Rule }
	var v view
	err := nftnl.WithNFT(func(c *nftnl.NftConn) error {
		if !iptnft.IptablesPostrouting(c, f) {
			return iptnft.ErrNotNFTReady
		}
		table := &nftables.Table{Name: "nat", Family: f.Nft()}
		var err error
		v, err = nftnl.ConsistentOn(c.Nl, func() (view, error) {
			// Of POSTROUTING (a jump per pod) only the rules naming our
			// chain: none other can be a jump Check wants.
			post, err := nftnl.RulesWith(c, table, "POSTROUTING", []byte(want.chain))
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
	t := natTable{Chains: map[string]bool{"POSTROUTING": true, want.chain: true}, Rules: map[string][]string{}}
	for _, r := range v.own {
		spec, ok := iptnft.IptSaveSpec(f, r.Exprs)
		if !ok {
			// iptables-save may print it as one of want's rules (an
			// earlier MASQUERADE, a marker): only it can tell.
			return false
		}
		t.Rules[want.chain] = append(t.Rules[want.chain], spec)
	}
	for _, r := range v.post {
		// A jump Check wants is found by its exact spec; a rule that
		// cannot be rendered is none of them (if iptables-save would print
		// it as one, the fallback finds it there).
		if spec, ok := iptnft.IptSaveSpec(f, r.Exprs); ok {
			t.Rules["POSTROUTING"] = append(t.Rules["POSTROUTING"], spec)
		}
	}
	return len(t.missing(want)) == 0
}
