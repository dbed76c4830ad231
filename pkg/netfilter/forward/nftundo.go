package forward

import (
	"fmt"

	"github.com/google/nftables"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// The nftables backend's undo: what an ADD over a live attachment puts
// back when it fails (SetupUndoable, in nftables.go, records prior).

// restoreOwn takes o's rules in the allow chain back to prior, the ones
// read before an ADD (the undo of SetupUndoable): a rule whose handle is
// not prior's was added by it and goes, a prior rule no longer there was
// removed by it and comes back; the others are not touched. Over a live
// attachment (check --repair, a second ADD) its rules thus stay; on a
// fresh one this is Teardown. Shared parts stay, as after any teardown.
func (m *nftablesForward) restoreOwn(o netfilter.Owner, prior []*nftables.Rule) error {
	what := "restore nftables forward rules of " + o.String()
	c, err := nftnl.NewNFTConn()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer c.CloseLasting()
	s, err := m.read(c, []string{fwdNFTAllow}, false)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nftnl.RestoreRules(c, fwdNFTTableRef, fwdNFTChain(fwdNFTAllow), nftnl.OwnedRules(s.rules[fwdNFTAllow], o), prior, what)
}
