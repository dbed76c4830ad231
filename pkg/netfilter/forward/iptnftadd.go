package forward

import (
	"net"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/iptnft"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// appendNFT is appendUnlocked's way for one family of iptables-nft
// without a process: where appendUnlocked would read the filter table
// with iptables-save and append the attachment's two rules per address to
// CNI-FORWARD with iptables-restore (two processes, most of a firewall
// ADD), it reads FORWARD and CNI-FORWARD over netlink, in one generation,
// and appends the same rules in one batch, each encoded as iptables-nft
// encodes its spec (fwdWant, the encoding Check looks for). So
// iptables-save prints them as iptables-restore's own, and iptables -C
// and -D find them by their spec.
//
// It answers true only in the case where setupLines gives nothing but
// those appends: ingressPolicy open, FORWARD's base chain as iptables-nft
// makes it with the jump to CNI-FORWARD, the admin chain there and its
// jump first in CNI-FORWARD, and no rule of this owner in CNI-FORWARD yet
// (a repeated ADD, which setupLines reconciles). Anything else (another
// policy, a table made otherwise, legacy iptables, a failed read, a batch
// the kernel refuses, which changed nothing) answers false, and the caller
// goes the iptables-save way, which reads again.
func (m *iptablesForward) appendNFT(r ForwardRules, f nftnl.Family, ips []net.IP) bool {
	if m.ipt.NoNFT || !m.ipt.IsNFTVariant(f) || r.Policy != IngressOpen || len(ips) == 0 {
		return false
	}
	want, ok := r.fwdWant(f, ips)
	if !ok {
		return false
	}
	own := netfilter.IptablesMarkerComment(r.Owner)
	err := nftnl.WithNFT(func(c *nftnl.NftConn) error {
		table := &nftables.Table{Name: "filter", Family: f.Nft()}
		ch, err := c.ListChain(table, "FORWARD")
		if err != nil || ch.Hooknum == nil || ch.Priority == nil || ch.Type != nftables.ChainTypeFilter ||
			*ch.Hooknum != *nftables.ChainHookForward || *ch.Priority != *nftables.ChainPriorityFilter {
			return iptnft.ErrNotNFTReady
		}
		if there, err := nftnl.NftChainExistsIn(c.Nl, f.Nft(), "filter", r.admin()); err != nil || !there {
			return iptnft.ErrNotNFTReady
		}
		type view struct{ forward, fwd []*nftables.Rule }
		v, err := nftnl.ConsistentOn(c.Nl, func() (view, error) {
			forward, err := c.GetRules(table, &nftables.Chain{Name: "FORWARD"})
			if err != nil {
				return view{}, err
			}
			fwd, err := c.GetRules(table, &nftables.Chain{Name: fwdChain})
			return view{forward, fwd}, err
		})
		if err != nil {
			return err
		}
		hasJump := false
		for _, rule := range v.forward {
			if iptnft.SameExprs(f, rule.Exprs, want.jump) {
				hasJump = true
				break
			}
		}
		if !hasJump || len(v.fwd) == 0 || !iptnft.SameExprs(f, v.fwd[0].Exprs, want.admin) {
			return iptnft.ErrNotNFTReady
		}
		for _, rule := range v.fwd {
			if xtComment(rule.Exprs) == own {
				return iptnft.ErrNotNFTReady
			}
		}
		chain := &nftables.Chain{Name: fwdChain, Table: table}
		for _, pair := range want.addrs {
			c.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: pair[0]})
		}
		return c.Flush()
	})
	return err == nil
}

// xtComment is the text of a rule's xt comment match, "" without one.
func xtComment(exprs []expr.Any) string {
	for _, e := range exprs {
		if mt, ok := e.(*expr.Match); ok && mt.Name == "comment" {
			if c, ok := mt.Info.(*xt.Comment); ok {
				return string(*c)
			}
		}
	}
	return ""
}
