package hostport

import (
	"errors"
	"fmt"
	"slices"

	"github.com/google/nftables"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// An ADD may land on a live attachment: check --repair, podman's network
// reload, a runtime's second ADD. Its undo (Setup's own on error, and the
// one SetupUndoable returns for a later step's failure) must then put back
// what was there, not remove the attachment's forwards: those carry a
// running pod's traffic. So each backend remembers what the attachment
// held before the change and the undo goes back to exactly that: on a
// fresh attachment (nothing before) it removes everything, as a teardown;
// on a live one it removes what this ADD added and adds back what it
// removed, leaving the rest (and its handles and counters) alone. The
// shared chains, tables and fixed rules stay, as after any teardown.

// restore takes o's forwards of fams back to prior, under the chains'
// locks (the undo of SetupUndoable).
func (p *iptablesPortMap) restore(o netfilter.Owner, fams []nftnl.Family, prior map[nftnl.Family]iptables.ChainSnapshot) error {
	unlock, err := p.m.LockChains(pmChain(o), pmDNATChain)
	if err != nil {
		return fmt.Errorf("restore port forwards of %s: %w", o, err)
	}
	defer unlock()
	var errs []error
	for _, f := range fams {
		if err := p.restoreFamily(o, f, prior[f]); err != nil {
			errs = append(errs, fmt.Errorf("restore %s port forwards of %s: %w", f, o, err))
		}
	}
	return errors.Join(errs...)
}

// restoreFamily takes o's forwards of f back to w; the caller holds the
// locks. Nothing before is a teardown (netlink's short way on
// iptables-nft).
func (p *iptablesPortMap) restoreFamily(o netfilter.Owner, f nftnl.Family, w iptables.ChainSnapshot) error {
	if !w.Exists {
		_, err := p.teardownFamily(o, f)
		return err
	}
	nat, err := p.m.Save(f)
	if err != nil {
		return err
	}
	return p.apply(f, map[string][]string{"nat": w.RestoreLines(nat)})
}

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
