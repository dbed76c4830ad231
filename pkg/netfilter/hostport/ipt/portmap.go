package ipt

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"

	"github.com/google/nftables"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/hostport"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
	"github.com/cniforge/plugins/pkg/netfilter/iptnft"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// iptablesPortMap is the iptables backend of port forwarding (the layout
// is in rules.go). It runs the tools through an iptables.Runner, as
// the masquerade and firewall backends do (same binaries, same chain
// locks): per family, a change is one
// iptables-save and one iptables-restore --noflush, except on iptables-nft
// beside other attachments, where ADD is one nf_tables batch
// (nftadd.go) and starts no process.
type iptablesPortMap struct {
	m *iptables.Runner
	// failFamily, when set, is asked before each family's change whether
	// it shall fail (tests: a later family's failure after an earlier one
	// went through).
	failFamily func(f nftnl.Family) error
}

func newIPTablesPortMap() *iptablesPortMap { return &iptablesPortMap{m: &iptables.Runner{}} }

func (p *iptablesPortMap) Backend() string { return netfilter.BackendIPTables }

func (p *iptablesPortMap) Usable() error { return p.m.Usable(nftnl.IPv4) }

// saveAll reads the nat and raw tables of f with one iptables-save of
// every table. Teardown, Check and GC need only nat and read it alone
// (m.save, iptables-save -t nat): the filter table it skips holds every
// pod's firewall chains, and a DEL holds the shared DNAT chain's lock
// while it reads.
func (p *iptablesPortMap) saveAll(f nftnl.Family) (nat, raw iptables.NatTable, err error) {
	out, err := p.m.Exec(p.m.Tool(f, "save"), nil, nil)
	if err != nil {
		return nat, raw, err
	}
	ts, err := iptables.ParseSave(out)
	empty := iptables.NatTable{Chains: map[string]bool{}, Rules: map[string][]string{}}
	nat, raw = ts["nat"], ts["raw"]
	if nat.Chains == nil {
		nat = empty
	}
	if raw.Chains == nil {
		raw = iptables.NatTable{Chains: map[string]bool{}, Rules: map[string][]string{}}
	}
	return nat, raw, err
}

func (p *iptablesPortMap) apply(f nftnl.Family, tables map[string][]string) error {
	payload := tablesPayload(tables)
	if len(payload) == 0 {
		return nil
	}
	_, err := p.m.Exec(p.m.Tool(f, "restore"), iptables.RestoreArgs, payload)
	return err
}

func (p *iptablesPortMap) Setup(opts hostport.PortMapOptions) error {
	_, err := p.SetupUndoable(opts)
	return err
}

func (p *iptablesPortMap) SetupUndoable(opts hostport.PortMapOptions) (undo func() error, err error) {
	o := opts.Owner
	unlock, err := p.m.LockChains(pmChain(o), pmDNATChain)
	if err != nil {
		return nil, fmt.Errorf("set up port forwards for %s: %w", o, err)
	}
	defer unlock()
	var fams []nftnl.Family
	for _, f := range nftnl.Families {
		if len(opts.MappingsFor(f)) > 0 {
			fams = append(fams, f)
		}
	}
	restore := func(f nftnl.Family, w iptables.ChainSnapshot) error { return p.restoreFamily(o, f, w) }
	done, err := iptables.FamilyStep{Fail: p.failFamily, Restore: restore,
		Setup: func(f nftnl.Family) (iptables.ChainSnapshot, error) { return p.setupFamily(opts, f) },
	}.SetupFamilies(fams)
	if err != nil {
		return nil, err
	}
	// The undo takes o's forwards back to done, under the chains' locks.
	return func() error {
		return p.m.RestoreFamilies([]string{pmChain(o), pmDNATChain}, "port forwards of "+o.String(), done, restore)
	}, nil
}

// setupFamily makes f's nat table hold opts and returns what the
// attachment's chain held before, for an undo.
func (p *iptablesPortMap) setupFamily(opts hostport.PortMapOptions, f nftnl.Family) (iptables.ChainSnapshot, error) {
	if err := p.m.Usable(f); err != nil {
		return iptables.ChainSnapshot{}, err
	}
	r := desiredPortMap(opts, f)
	if nat, raw, ok := p.sharedViewNFT(f, r.chain); ok {
		// A restore the kernel refuses here (the ruleset moved between
		// the read and the write, outside our locks) is retried below
		// with the full read; all or nothing per table, so a repeat is
		// safe. The chain is absent here: nothing of it before.
		tables := r.setupTables(nat, raw)
		if p.setupNFT(f, r.chain, tables) || p.apply(f, tables) == nil {
			return iptables.ChainSnapshot{}, nil
		}
	}
	nat, raw, err := p.saveAll(f)
	if err != nil {
		return iptables.ChainSnapshot{}, fmt.Errorf("set up %s port forwards for %s: %w", f, opts.Owner, err)
	}
	was := iptables.Snapshot(nat, r.chain, pmDNATChain)
	if err := p.apply(f, r.setupTables(nat, raw)); err != nil {
		return iptables.ChainSnapshot{}, fmt.Errorf("set up %s port forwards for %s in nat chain %s: %w", f, opts.Owner, r.chain, err)
	}
	return was, nil
}

func (r pmRules) setupTables(nat, raw iptables.NatTable) map[string][]string {
	return map[string][]string{
		"nat": append(r.sharedLines(nat), r.attachLines(nat)...),
		"raw": r.guardLines(raw),
	}
}

// sharedViewNFT is setupFamily's short way for iptables-nft: what
// sharedLines and guardLines look at (which chains exist in nat and raw,
// and where PREROUTING, OUTPUT and POSTROUTING jump) read over netlink in
// one generation, instead of with iptables-save (a process, about 10 ms).
// The rules it returns hold only their jump ("-j <chain>"), which is all
// hasJump reads. It answers ok only when the attachment's chain is absent,
// the common ADD: then no entry can jump to it either and attachLines
// needs nothing else. A chain that exists (a repeated ADD, whose rules
// attachLines compares as text) or any doubt sends the caller to
// iptables-save.
func (p *iptablesPortMap) sharedViewNFT(f nftnl.Family, chain string) (nat, raw iptables.NatTable, ok bool) {
	if p.m.NoNFT || !p.m.IsNFTVariant(f) {
		return nat, raw, false
	}
	nc, release, err := nftnl.AcquireNFT()
	if err != nil {
		return nat, raw, false
	}
	failed := true
	defer func() { release(failed) }()
	c := nc.Conn
	fam := f.Nft()
	type view struct {
		nat, raw iptables.NatTable
		unread   bool // a mark chain's rule markRuleSpec cannot render
	}
	v, err := nftnl.ConsistentOn(nc.Nl, func() (view, error) {
		chains, err := c.ListChainsOfTableFamily(fam)
		if err != nil {
			return view{}, err
		}
		tables := map[string]iptables.NatTable{}
		for _, name := range []string{"nat", "raw"} {
			tables[name] = iptables.NatTable{Chains: map[string]bool{}, Rules: map[string][]string{}}
		}
		for _, ch := range chains {
			if ch.Table == nil {
				continue
			}
			if t, ok := tables[ch.Table.Name]; ok {
				t.Chains[ch.Name] = true
			}
		}
		for table, names := range map[string][]string{"nat": {"PREROUTING", "OUTPUT", "POSTROUTING"}, "raw": {"PREROUTING"}} {
			t := tables[table]
			for _, name := range names {
				if !t.Chains[name] {
					continue
				}
				rules, err := c.GetRules(&nftables.Table{Name: table, Family: fam}, &nftables.Chain{Name: name})
				if err != nil {
					return view{}, err
				}
				for _, r := range rules {
					if j := iptnft.ReadIPTRule(r).Jump; j != "" {
						t.Rules[name] = append(t.Rules[name], "-j "+j)
					}
				}
			}
		}
		// The mark chains' rules, which sharedLines puts back when
		// missing (issue 29).
		ok, err := readMarkChains(c, fam, tables["nat"])
		if err != nil {
			return view{}, err
		}
		return view{tables["nat"], tables["raw"], !ok}, nil
	})
	failed = err != nil
	if err != nil || v.unread || v.nat.Chains[chain] {
		return nat, raw, false
	}
	return v.nat, v.raw, true
}

func (p *iptablesPortMap) Teardown(o netfilter.Owner) ([]net.IP, error) {
	unlock, err := p.m.LockChains(pmChain(o), pmDNATChain)
	if err != nil {
		return nil, fmt.Errorf("tear down port forwards for %s: %w", o, err)
	}
	defer unlock()
	var ips []net.IP
	var errs []error
	for _, f := range nftnl.Families {
		if p.m.Usable(f) != nil {
			continue
		}
		got, err := p.teardownFamily(o, f)
		ips = append(ips, got...)
		errs = append(errs, err)
	}
	return ips, errors.Join(errs...)
}

func (p *iptablesPortMap) teardownFamily(o netfilter.Owner, f nftnl.Family) ([]net.IP, error) {
	chain := pmChain(o)
	if p.m.ChainSurelyAbsent(f, chain) {
		return nil, nil
	}
	if ips, done := p.teardownNFT(o, f); done {
		return ips, nil
	}
	nat, err := p.m.Save(f)
	if err != nil {
		return nil, fmt.Errorf("tear down %s port forwards for %s: %w", f, o, err)
	}
	var ips []net.IP
	for _, s := range nat.Rules[chain] {
		if m := dnatTargetRE.FindStringSubmatch(s); m != nil {
			if ip := net.ParseIP(m[1]); ip != nil && !slices.ContainsFunc(ips, ip.Equal) {
				ips = append(ips, ip)
			}
		}
	}
	if err := p.apply(f, map[string][]string{"nat": removeLines(nat, chain)}); err != nil {
		return ips, fmt.Errorf("delete %s nat chain %s of %s: %w", f, chain, o, err)
	}
	return ips, nil
}

func (p *iptablesPortMap) Check(opts hostport.PortMapOptions) error {
	var errs []error
	for _, f := range nftnl.Families {
		if len(opts.MappingsFor(f)) == 0 {
			continue
		}
		r := desiredPortMap(opts, f)
		if p.checkNFT(f, r) {
			continue // all there, read over netlink (nftcheck.go)
		}
		// Only nat: the route_localnet guard in raw is ours alone
		// (upstream makes none), so an upstream ADD passes CHECK without it.
		nat, err := p.m.Save(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("check %s port forwards: %w", f, err))
			continue
		}
		var miss []string
		miss = append(miss, r.sharedLines(nat)...)
		if !nat.Chains[r.chain] {
			miss = append(miss, "nat chain "+r.chain)
		}
		for _, s := range r.rules {
			if !slices.Contains(nat.Rules[r.chain], s) && !slices.ContainsFunc(r.alts[s], func(a string) bool {
				return slices.Contains(nat.Rules[r.chain], a)
			}) {
				miss = append(miss, "-A "+r.chain+" "+s)
			}
		}
		have := entryPorts(entriesTo(nat, r.chain))
		for _, proto := range slices.Sorted(maps.Keys(r.ports)) {
			for _, port := range r.ports[proto] {
				if !have[proto][port] {
					miss = append(miss, fmt.Sprintf("-A %s -p %s ... --dports %d -j %s", pmDNATChain, proto, port, r.chain))
				}
			}
		}
		for _, m := range miss {
			errs = append(errs, fmt.Errorf("%w: %s %s", hostport.ErrPortMapMissing, f, strings.TrimPrefix(strings.TrimPrefix(m, "-N "), "-A ")))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("iptables port forwards of %s: %w", opts.Owner, errors.Join(hostport.CapMissing(errs)...))
	}
	return nil
}

func (p *iptablesPortMap) GC(network string, keep []netfilter.Owner) error {
	kept := map[string]bool{}
	for _, o := range keep {
		if o.Network == network {
			kept[pmChain(o)] = true
		}
	}
	var errs []error
	for _, f := range nftnl.Families {
		if p.m.Usable(f) != nil {
			continue
		}
		errs = append(errs, p.gcFamily(f, network, kept))
	}
	return errors.Join(errs...)
}

func (p *iptablesPortMap) gcFamily(f nftnl.Family, network string, kept map[string]bool) error {
	stale := func(nat iptables.NatTable) []string {
		var chains []string
		for chain := range nat.Chains {
			if !pmChainRE.MatchString(chain) || kept[chain] {
				continue
			}
			for _, e := range entriesTo(nat, chain) {
				if m := pmCommentRE.FindStringSubmatch(e); m != nil && m[1] == network {
					chains = append(chains, chain)
					break
				}
			}
		}
		slices.Sort(chains)
		return chains
	}
	nat, err := p.m.Save(f)
	if err != nil {
		return fmt.Errorf("gc %s port forwards of network %q: %w", f, network, err)
	}
	chains := stale(nat)
	if len(chains) == 0 {
		return nil
	}
	unlock, err := p.m.LockChains(append(slices.Clone(chains), pmDNATChain)...)
	if err != nil {
		return fmt.Errorf("gc %s port forwards of network %q: %w", f, network, err)
	}
	defer unlock()
	if nat, err = p.m.Save(f); err != nil {
		return fmt.Errorf("gc %s port forwards of network %q: %w", f, network, err)
	}
	var errs []error
	for _, chain := range stale(nat) {
		if err := p.apply(f, map[string][]string{"nat": removeLines(nat, chain)}); err != nil {
			errs = append(errs, fmt.Errorf("gc %s nat chain %s of network %q: %w", f, chain, network, err))
		}
	}
	return errors.Join(errs...)
}

// teardownNFT is teardownFamily's short way for iptables-nft, as the
// masquerade's (iptablesMasq.teardownNFT): it reads the attachment's chain
// and CNI-HOSTPORT-DNAT over netlink and deletes the chain and every entry
// jumping to it by handle, in one batch, with no process. It returns the
// DNAT addresses for the conntrack flush; a DNAT target it cannot read, or
// a batch the kernel refuses, answers done=false and the caller reads with
// iptables-save.
func (p *iptablesPortMap) teardownNFT(o netfilter.Owner, f nftnl.Family) (ips []net.IP, done bool) {
	if p.m.NoNFT || !p.m.IsNFTVariant(f) {
		return nil, false
	}
	d, err := iptnft.ReadNFTChain(f, "nat", pmDNATChain, pmChain(o))
	if err != nil {
		return nil, false
	}
	defer d.Close()
	for _, r := range d.Own {
		ri := iptnft.ReadIPTRule(r)
		if ri.DnatUnread {
			return nil, false
		}
		if ri.Dnat != nil && !slices.ContainsFunc(ips, ri.Dnat.Equal) {
			ips = append(ips, ri.Dnat)
		}
	}
	return ips, d.DeleteChain()
}
