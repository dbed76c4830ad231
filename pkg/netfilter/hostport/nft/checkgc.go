package nft

import (
	"errors"
	"fmt"
	"slices"

	"github.com/google/nftables"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/hostport"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// CHECK and GC of the nftables backend: what an attachment's forwards
// need (its elements and the shared chains' fixed rules), and which
// elements of a network no kept attachment owns.

func (p *nftablesPortMap) Check(opts hostport.PortMapOptions) error {
	c, err := p.conn()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	hash := nftPMHash(opts.Owner)
	var miss []error
	for _, f := range nftnl.Families {
		if len(opts.MappingsFor(f)) == 0 {
			continue
		}
		s, err := p.read(c, f, false, true)
		if err != nil {
			return fmt.Errorf("check nftables port forwards for %s: %w", opts.Owner, err)
		}
		var fmiss []error
		for _, def := range pmChains(f) {
			// A table made before issue 22 lacks masquerading_nets; its
			// hairpin element is in hairpin, masqueraded by masquerading.
			if def.chain.Name == pmMasqNetsChain && (!opts.SNAT || s.hasOldHairpin(opts, f, hash)) {
				continue
			}
			if !s.chains[def.chain.Name] {
				fmiss = append(fmiss, fmt.Errorf("%w: %s %s chain %s", hostport.ErrPortMapMissing, f, pmTable, def.chain.Name))
			}
		}
		// The fixed rules of the shared chains this attachment's forwards
		// go through (issue 29). Without prerouting's or output's jump
		// nothing is forwarded, upstream's rules included.
		rules, err := p.pmChainRules(c, f, s)
		if err != nil {
			return fmt.Errorf("check nftables port forwards for %s: %w", opts.Owner, err)
		}
		var entry []error
		for _, m := range pmMissingFixed(f, rules, pmNeeds(opts, f, s.hasOldHairpin(opts, f, hash))) {
			err := fmt.Errorf("%w: %s %s chain %s: rule %s", hostport.ErrPortMapMissing, f, pmTable, m.chain.Name, m.what)
			if m.chain.Name == "prerouting" || m.chain.Name == "output" {
				entry = append(entry, err)
			} else {
				fmiss = append(fmiss, err)
			}
		}
		for set, want := range pmElements(opts, f) {
			have := s.own(set, hash)
			for _, w := range want {
				if !slices.ContainsFunc(have, func(h nftables.SetElement) bool {
					return string(h.Key) == string(w.Key) && string(h.Val) == string(w.Val) && string(h.KeyEnd) == string(w.KeyEnd)
				}) && !(set == pmHairpinNets && s.hasOldHairpin(opts, f, hash)) {
					fmiss = append(fmiss, fmt.Errorf("%w: %s %s element %x of %s", hostport.ErrPortMapMissing, f, pmTable, w.Key, set))
				}
			}
		}
		if len(fmiss) > 0 {
			// Upstream's nftables ADD made rules, not elements.
			up, err := p.read(c, f, true, false)
			if err != nil {
				return fmt.Errorf("check nftables port forwards for %s: %w", opts.Owner, err)
			}
			if upstreamCovers(up, opts, f) {
				fmiss = nil
			}
		}
		miss = append(append(miss, entry...), fmiss...)
	}
	if len(miss) > 0 {
		return fmt.Errorf("nftables port forwards of %s: %w", opts.Owner, errors.Join(hostport.CapMissing(miss)...))
	}
	return nil
}

func (p *nftablesPortMap) GC(network string, keep []netfilter.Owner) error {
	c, err := p.conn()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	kept := map[string]bool{}
	for _, o := range keep {
		if o.Network == network {
			kept[nftPMHash(o)] = true
		}
	}
	changed := false
	b := &pmBatch{c: c}
	for _, f := range nftnl.Families {
		s, err := p.read(c, f, false, true)
		if err != nil {
			return fmt.Errorf("gc nftables port forwards of network %q: %w", network, err)
		}
		for _, set := range pmSets(f) {
			var stale []nftables.SetElement
			for _, e := range s.elems[set.Name] {
				if h, nw, ok := parseNFTPMComment(e.Comment); ok && nw == network && !kept[h] {
					stale = append(stale, e)
				}
			}
			if len(stale) > 0 {
				if err := b.del(set, stale); err != nil {
					return fmt.Errorf("gc nftables port forwards of network %q: %w", network, err)
				}
				changed = true
			}
		}
	}
	if !changed {
		return nil
	}
	if err := b.flush(); err != nil {
		return fmt.Errorf("gc nftables port forwards of network %q: %w", network, err)
	}
	return nil
}
