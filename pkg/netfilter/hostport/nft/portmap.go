package nft

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/filelock"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/hostport"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// nftablesPortMap is the nftables backend of port forwarding (the layout
// is in rules.go). Every call is one netlink socket, reads that
// are generation-consistent, and one batch for both families, which the
// kernel applies entirely or not at all, unless the elements exceed what
// one batch may carry (a few hundred mappings or more; batch.go):
// then Setup undoes the batches it sent when a later one fails.
type nftablesPortMap struct {
	// failBatch, when set, makes the kernel refuse the element batches
	// it answers true for (tests; see pmBatch).
	failBatch func(n int) bool
	// legacyHairpin: this kernel cannot make hairpin_nets (see
	// retryLegacyHairpin); hairpin goes by the set of before issue 22.
	legacyHairpin bool
}

func newNFTablesPortMap() *nftablesPortMap { return &nftablesPortMap{} }

func (p *nftablesPortMap) Backend() string { return netfilter.BackendNFTables }

func (p *nftablesPortMap) Usable() error { return nftnl.Usable() }

// pmState is what the kernel holds of one family's table.
type pmState struct {
	chains   map[string]bool
	prio     map[string]nftables.ChainPriority // base chains' priorities
	elems    map[string][]nftables.SetElement
	upstream map[string][]*nftables.Rule // rules of the regular chains with a comment
}

// misplaced reports whether def's base chain exists at another priority:
// upstream's (and earlier releases') prerouting and output at dstnat,
// which Setup moves after kube-proxy's (pmDNATPriority).
func (s pmState) misplaced(def pmChainDef) bool {
	p, ok := s.prio[def.chain.Name]
	return ok && def.chain.Priority != nil && p != *def.chain.Priority
}

// read reads family f's chains, the elements of its sets (withElems) and
// upstream's commented rules (withRules).
func (p *nftablesPortMap) read(c *nftables.Conn, f nftnl.Family, withRules, withElems bool) (pmState, error) {
	return nftnl.Consistent(func() (pmState, error) {
		s := pmState{chains: map[string]bool{}, prio: map[string]nftables.ChainPriority{}, elems: map[string][]nftables.SetElement{}, upstream: map[string][]*nftables.Rule{}}
		chains, err := c.ListChainsOfTableFamily(f.Nft())
		if err != nil {
			return s, fmt.Errorf("list %s chains: %w", f, nftnl.NftUnsupported(err))
		}
		for _, ch := range chains {
			if ch.Table != nil && ch.Table.Name == pmTable {
				s.chains[ch.Name] = true
				if ch.Priority != nil {
					s.prio[ch.Name] = *ch.Priority
				}
			}
		}
		if len(s.chains) == 0 {
			return s, nil
		}
		var sets []*nftables.Set
		if withElems {
			sets, err = c.GetSets(pmTableOf(f))
			if err != nil {
				return s, fmt.Errorf("list sets of %s %s: %w", f, pmTable, err)
			}
		}
		for _, set := range sets {
			els, err := c.GetSetElements(set)
			if err != nil {
				return s, fmt.Errorf("list set %s of %s %s: %w", set.Name, f, pmTable, err)
			}
			s.elems[set.Name] = els
		}
		if withRules {
			for _, name := range pmUpstreamChains {
				if !s.chains[name] {
					continue
				}
				rs, err := c.GetRules(pmTableOf(f), &nftables.Chain{Name: name, Table: pmTableOf(f)})
				if err != nil {
					return s, fmt.Errorf("list rules of %s %s %s: %w", f, pmTable, name, err)
				}
				for _, r := range rs {
					if r.UserData != nil {
						s.upstream[name] = append(s.upstream[name], r)
					}
				}
			}
		}
		return s, nil
	})
}

func (p *nftablesPortMap) conn() (*nftables.Conn, error) { return nftnl.NewNFTConn() }

// own returns the elements of set in s owned by hash.
func (s pmState) own(set, hash string) []nftables.SetElement {
	var out []nftables.SetElement
	for _, e := range s.elems[set] {
		if h, _, ok := parseNFTPMComment(e.Comment); ok && h == hash {
			out = append(out, e)
		}
	}
	return out
}

// hasOldHairpin reports whether s holds the hairpin element cniforge
// added for opts before hairpin_nets existed (CHECK accepts it).
func (s pmState) hasOldHairpin(opts hostport.PortMapOptions, f nftnl.Family, hash string) bool {
	old := oldHairpinElem(opts, f)
	return slices.ContainsFunc(s.own(pmHairpin, hash), func(e nftables.SetElement) bool { return string(e.Key) == string(old) })
}

func sameElems(a, b []nftables.SetElement) bool {
	key := func(e nftables.SetElement) string {
		return string(e.Key) + "-" + string(e.KeyEnd) + "=" + string(e.Val)
	}
	ka, kb := make([]string, len(a)), make([]string, len(b))
	for i := range a {
		ka[i] = key(a[i])
	}
	for i := range b {
		kb[i] = key(b[i])
	}
	slices.Sort(ka)
	slices.Sort(kb)
	return slices.Equal(ka, kb)
}

// pmLockFile serialises the creation of the tables, so that two first ADDs
// do not both add the fixed rules.
const pmLockFile = "/run/cniforge/nft-cni_hostport.lock"

func (p *nftablesPortMap) Setup(opts hostport.PortMapOptions) error {
	_, err := p.SetupUndoable(opts)
	return err
}

func (p *nftablesPortMap) SetupUndoable(opts hostport.PortMapOptions) (undo func() error, err error) {
	prior, netsMissing, err := p.setup(opts)
	if !p.legacyHairpin && retryLegacyHairpin(err, netsMissing) {
		q := *p
		q.legacyHairpin = true
		return q.SetupUndoable(opts)
	}
	if err != nil {
		return nil, err
	}
	return func() error { return p.restore(opts.Owner, prior) }, nil
}

// retryLegacyHairpin reports whether Setup's err may say the kernel cannot
// make hairpin_nets (a concatenation with ranges, Linux 5.6 on; before,
// NFT_SET_CONCAT is an unknown flag: EOPNOTSUPP since 5.5, EINVAL before)
// that Setup tried to create. Setup then goes once more with the hairpin
// set of before issue 22 (the retry differs only in that, so an error it
// also meets is reported): the container's own hairpin works, a
// neighbour's through the host needs br_netfilter, as with upstream's
// nftables backend.
func retryLegacyHairpin(err error, netsMissing bool) bool {
	return err != nil && netsMissing && (errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL))
}

// setupSets and setupChains are what Setup declares in family f: on a
// kernel without hairpin_nets (legacyHairpin), neither it nor the chain
// that reads it.
func (p *nftablesPortMap) setupSets(f nftnl.Family) []*nftables.Set {
	if !p.legacyHairpin {
		return pmSets(f)
	}
	return slices.DeleteFunc(pmSets(f), func(s *nftables.Set) bool { return s.Name == pmHairpinNets })
}

func (p *nftablesPortMap) setupChains(f nftnl.Family) []pmChainDef {
	if !p.legacyHairpin {
		return pmChains(f)
	}
	return slices.DeleteFunc(pmChains(f), func(d pmChainDef) bool { return d.chain.Name == pmMasqNetsChain })
}

// setup is Setup's one try; netsMissing says whether some family's table
// lacked the hairpin_nets set, which the try then declared. prior is what
// the attachment's elements were before, per family (undo.go).
func (p *nftablesPortMap) setup(opts hostport.PortMapOptions) (prior map[nftnl.Family]pmOwnElems, netsMissing bool, err error) {
	c, err := p.conn()
	if err != nil {
		return nil, false, err
	}
	defer c.CloseLasting()
	hash := nftPMHash(opts.Owner)
	var fams []nftnl.Family
	for _, f := range nftnl.Families {
		if len(opts.MappingsFor(f)) > 0 {
			fams = append(fams, f)
		}
	}
	states := map[nftnl.Family]pmState{}
	prior = map[nftnl.Family]pmOwnElems{}
	fixed := map[nftnl.Family][]pmMissingRule{}
	locked := false
	for _, f := range fams {
		s, err := p.read(c, f, false, true)
		if err != nil {
			return nil, netsMissing, fmt.Errorf("set up nftables port forwards for %s: %w", opts.Owner, err)
		}
		// The shared chains' fixed rules, put back where missing (issue
		// 29): a read of a few short chains, under the lock only when
		// something is missing.
		missing, err := p.missingFixed(c, f, s)
		if err != nil {
			return nil, netsMissing, fmt.Errorf("set up nftables port forwards for %s: %w", opts.Owner, err)
		}
		if len(s.chains) < len(p.setupChains(f)) || len(missing) > 0 || slices.ContainsFunc(p.setupChains(f), s.misplaced) {
			if !locked { // one flock: a second open of the file would wait for the first
				_ = os.MkdirAll(filepath.Dir(pmLockFile), 0o700) // Lock reports a missing directory
				lock, err := filelock.Lock(pmLockFile, 0o600)
				if err != nil {
					return nil, netsMissing, fmt.Errorf("set up nftables port forwards for %s: %w", opts.Owner, err)
				}
				defer lock.Close()
				locked = true
			}
			if s, err = p.read(c, f, false, true); err != nil {
				return nil, netsMissing, fmt.Errorf("set up nftables port forwards for %s: %w", opts.Owner, err)
			}
			if missing, err = p.missingFixed(c, f, s); err != nil {
				return nil, netsMissing, fmt.Errorf("set up nftables port forwards for %s: %w", opts.Owner, err)
			}
		}
		fixed[f] = missing
		if _, ok := s.elems[pmHairpinNets]; !ok && !p.legacyHairpin {
			netsMissing = true
		}
		states[f] = s
	}
	// One batch for both families, all or nothing, unless the elements
	// need more (pmBatch): then a failed batch undoes the ones before it.
	b := &pmBatch{c: c, failBatch: p.failBatch}
	for _, f := range fams {
		s := states[f]
		c.AddTable(pmTableOf(f))
		sets := map[string]*nftables.Set{}
		for _, set := range p.setupSets(f) {
			// An existing set is not declared again: one nft -f loaded
			// back (a listing of the table) differs in attributes the
			// kernel then refuses to update (EEXIST).
			if _, there := s.elems[set.Name]; there {
				sets[set.Name] = set
				continue
			}
			if err := c.AddSet(set, nil); err != nil {
				return nil, netsMissing, fmt.Errorf("set up nftables port forwards for %s: set %s: %w", opts.Owner, set.Name, err)
			}
			sets[set.Name] = set
		}
		moved := map[string]bool{}
		for _, def := range p.setupChains(f) {
			// An existing chain is not declared again: that would be an
			// update, whose cleanup after an RCU grace period the close
			// of every nfnetlink socket then waits for (see nftnl/conn.go).
			// One at another priority is made again (a base chain's
			// priority cannot be updated): deleted with its rules (no
			// rule jumps to a base chain), added with ours, in this batch.
			if s.chains[def.chain.Name] && !s.misplaced(def) {
				continue
			}
			if s.chains[def.chain.Name] {
				c.DelChain(&nftables.Chain{Name: def.chain.Name, Table: def.chain.Table})
				moved[def.chain.Name] = true
			}
			ch := c.AddChain(def.chain)
			for _, r := range def.rules {
				c.AddRule(&nftables.Rule{Table: ch.Table, Chain: ch, Exprs: r})
			}
		}
		for _, m := range fixed[f] {
			if moved[m.chain.Name] {
				continue // made again whole above
			}
			c.AddRule(&nftables.Rule{Table: pmTableOf(f), Chain: m.chain, Exprs: m.exprs})
		}
		want := pmElements(opts, f)
		if p.legacyHairpin && len(want[pmHairpinNets]) > 0 {
			want[pmHairpin] = []nftables.SetElement{{Key: oldHairpinElem(opts, f), Comment: nftPMComment(opts.Owner)}}
			delete(want, pmHairpinNets)
		}
		prior[f] = pmOwnElems{}
		for _, set := range p.setupSets(f) {
			have := s.own(set.Name, hash)
			prior[f][set.Name] = have // for the undo (undo.go)
			if sameElems(have, want[set.Name]) {
				continue
			}
			if err := b.del(sets[set.Name], have); err != nil {
				return nil, netsMissing, p.undoSetup(b, opts.Owner, err)
			}
			if err := b.add(sets[set.Name], want[set.Name]); err != nil {
				return nil, netsMissing, p.undoSetup(b, opts.Owner, err)
			}
		}
	}
	if err := b.flush(); err != nil {
		return nil, netsMissing, p.undoSetup(b, opts.Owner, err)
	}
	return prior, netsMissing, nil
}

// undoSetup reverts the batches Setup sent before err and returns err,
// with the undo's own failure if any.
func (p *nftablesPortMap) undoSetup(b *pmBatch, o netfilter.Owner, err error) error {
	err = fmt.Errorf("set up nftables port forwards for %s in %s: %w", o, pmTable, err)
	if len(b.sent) == 0 {
		return err
	}
	sent := b.batches - 1
	if uerr := b.undo(); uerr != nil {
		err = errors.Join(err, fmt.Errorf("undo the %d batches sent before: %w", sent, uerr))
	}
	return err
}

func (p *nftablesPortMap) Teardown(o netfilter.Owner) ([]net.IP, error) { return p.TeardownOf(o, nil) }

// TeardownOf is Teardown for DEL, which knows o's mappings: with a few, it
// looks up their elements by key (get.go) rather than reading
// whole maps, so its cost does not grow with other containers' mappings.
func (p *nftablesPortMap) TeardownOf(o netfilter.Owner, mappings []hostport.PortMapping) ([]net.IP, error) {
	c, err := p.conn()
	if err != nil {
		return nil, err
	}
	defer c.CloseLasting()
	hash := nftPMHash(o)
	ips, changed, byKey, err := p.teardownByKey(c, o, mappings)
	if err != nil {
		return ips, fmt.Errorf("tear down nftables port forwards for %s: %w", o, err)
	}
	b := &pmBatch{c: c}
	for _, f := range nftnl.Families {
		s, err := p.read(c, f, true, !byKey)
		if err != nil {
			return ips, fmt.Errorf("tear down nftables port forwards for %s: %w", o, err)
		}
		for _, set := range pmSets(f) {
			own := s.own(set.Name, hash)
			if len(own) == 0 {
				continue
			}
			if set.Name == pmPortsMap || set.Name == pmHostIPMap {
				for _, e := range own {
					ip := net.IP(slices.Clone(e.Val[:nftnl.AddrField[f].Len]))
					if !slices.ContainsFunc(ips, ip.Equal) {
						ips = append(ips, ip)
					}
				}
			}
			if err := b.del(set, own); err != nil {
				return ips, fmt.Errorf("tear down nftables port forwards for %s in %s: %w", o, pmTable, err)
			}
			changed = true
		}
		// Upstream's rules, commented with the container ID.
		for _, rs := range s.upstream {
			for _, r := range rs {
				if nftnl.NftRuleFrom(r).Comment == o.ContainerID {
					if err := c.DelRule(r); err != nil {
						return ips, err
					}
					changed = true
				}
			}
		}
	}
	if !changed {
		return ips, nil
	}
	if err := b.flush(); err != nil {
		return ips, fmt.Errorf("tear down nftables port forwards for %s in %s: %w", o, pmTable, err)
	}
	return ips, nil
}
