package nftnl

import (
	"fmt"
	"slices"

	"github.com/google/nftables"

	"github.com/cniforge/plugins/pkg/netfilter"
)

// OwnedRules returns those of rs whose comment is o's, in upstream's form
// or our earlier one (netfilter.ParseNFTComment reads both).
func OwnedRules(rs []*nftables.Rule, o netfilter.Owner) []*nftables.Rule {
	var out []*nftables.Rule
	for _, r := range rs {
		if c, ok := netfilter.ParseNFTComment(NftRuleFrom(r).Comment); ok && c.Owns(o) {
			out = append(out, r)
		}
	}
	return out
}

// RestoreRules takes an owner's rules of chain from have (read now) back
// to prior (read before a change: the undo of a SetupUndoable), in one
// batch on c: a rule of have whose handle is not prior's was added since
// and goes, a rule of prior no longer there was removed since and comes
// back (at the chain's end); the others are not touched. what names the
// change in errors ("restore nftables masquerade of <owner>").
func RestoreRules(c *nftables.Conn, table *nftables.Table, chain *nftables.Chain, have, prior []*nftables.Rule, what string) error {
	handles := func(rs []*nftables.Rule) []uint64 {
		out := make([]uint64, len(rs))
		for i, r := range rs {
			out[i] = r.Handle
		}
		return out
	}
	was, now := handles(prior), handles(have)
	n := 0
	for _, r := range have {
		if !slices.Contains(was, r.Handle) {
			if err := c.DelRule(r); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			n++
		}
	}
	for _, r := range prior {
		if !slices.Contains(now, r.Handle) {
			c.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: r.Exprs, UserData: r.UserData})
			n++
		}
	}
	if err := FlushQueued(c, n > 0); err != nil {
		return fmt.Errorf("%s in inet %s: %w", what, table.Name, err)
	}
	return nil
}

// FlushQueued sends the batch queued on c when queued says there is one,
// so that a change that found nothing to do sends nothing.
func FlushQueued(c *nftables.Conn, queued bool) error {
	if !queued {
		return nil
	}
	return c.Flush()
}
