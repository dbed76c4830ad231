package nft

import (
	"fmt"
	"slices"

	"github.com/google/nftables"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// The undo of an nftables Setup over a live attachment (see hostport/ipt/undo.go
// for why): the owner's elements per set before the change, put back.

// elemKey identifies a set element by what it matches and maps to.
func elemKey(e nftables.SetElement) string {
	return string(e.Key) + "-" + string(e.KeyEnd) + "=" + string(e.Val)
}

// pmOwnElems is what one family's sets held of an owner: set name ->
// elements.
type pmOwnElems map[string][]nftables.SetElement

// restore takes o's elements back to prior (family -> set -> elements),
// in batches as Setup sends them: elements this ADD added are deleted,
// those it removed are added back, the others are not touched. Upstream's
// rules are not Setup's to change, so they are left.
func (p *nftablesPortMap) restore(o netfilter.Owner, prior map[nftnl.Family]pmOwnElems) error {
	c, err := p.conn()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	hash := nftPMHash(o)
	b := &pmBatch{c: c}
	for _, f := range nftnl.Families {
		was, ok := prior[f]
		if !ok {
			continue // Setup did not touch this family
		}
		s, err := p.read(c, f, false, true)
		if err != nil {
			return fmt.Errorf("restore nftables port forwards of %s: %w", o, err)
		}
		for _, set := range pmSets(f) {
			have, want := s.own(set.Name, hash), was[set.Name]
			var del, add []nftables.SetElement
			for _, e := range have {
				if !slices.ContainsFunc(want, func(w nftables.SetElement) bool { return elemKey(w) == elemKey(e) }) {
					del = append(del, e)
				}
			}
			for _, e := range want {
				if !slices.ContainsFunc(have, func(h nftables.SetElement) bool { return elemKey(h) == elemKey(e) }) {
					add = append(add, e)
				}
			}
			if err := b.del(set, del); err != nil {
				return fmt.Errorf("restore nftables port forwards of %s in %s: %w", o, pmTable, err)
			}
			if err := b.add(set, add); err != nil {
				return fmt.Errorf("restore nftables port forwards of %s in %s: %w", o, pmTable, err)
			}
		}
	}
	if len(b.queued) == 0 {
		return nil
	}
	if err := b.flush(); err != nil {
		return fmt.Errorf("restore nftables port forwards of %s in %s: %w", o, pmTable, err)
	}
	return nil
}
