package forward

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/filelock"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// nftablesForward is the nftables backend of the forward filter (layout in
// nftrules.go). Every call is one netlink socket, reads that are
// generation-consistent, and at most one batch, which the kernel applies
// entirely or not at all. The shared parts (table, chains, base rules,
// isolation rules, the delegation rule in iptables-nft's FORWARD) are
// changed under a flock, so two first ADDs do not both add them; an
// attachment's own rules need no lock.
type nftablesForward struct{}

func newNFTablesForward() *nftablesForward { return &nftablesForward{} }

func (m *nftablesForward) Backend() string { return netfilter.BackendNFTables }

func (m *nftablesForward) usable() error { return nftnl.Usable() }

// fwdLockFile serialises changes of the shared parts.
const fwdLockFile = "/run/cniforge/nft-cni_firewall.lock"

// fwdState is what the kernel holds of our table and of iptables-nft's
// FORWARD chains.
type fwdState struct {
	chains map[string]*nftables.Chain
	rules  map[string][]*nftables.Rule // rules of our chains (those read)
	deleg  map[nftnl.Family]delegState
}

// delegState is one family's iptables-nft filter FORWARD chain.
type delegState struct {
	chain     *nftables.Chain // nil: no such chain
	dropsRest bool            // policy drop, or its last rule drops or rejects
	ours      []*nftables.Rule
}

// read lists our table's chains and the rules of chains (all of ours when
// nil); with deleg, also iptables-nft's FORWARD chains.
func (m *nftablesForward) read(c *nftables.Conn, chains []string, deleg bool) (fwdState, error) {
	return nftnl.Consistent(func() (fwdState, error) {
		s := fwdState{chains: map[string]*nftables.Chain{}, rules: map[string][]*nftables.Rule{}, deleg: map[nftnl.Family]delegState{}}
		all, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
		if err != nil {
			return s, fmt.Errorf("list inet chains: %w", nftnl.NftUnsupported(err))
		}
		for _, ch := range all {
			if ch.Table != nil && ch.Table.Name == fwdNFTTable {
				s.chains[ch.Name] = ch
			}
		}
		if chains == nil {
			chains = append([]string{fwdNFTBase}, fwdNFTChains...)
		}
		for _, name := range chains {
			if s.chains[name] == nil {
				continue
			}
			if s.rules[name], err = c.GetRules(fwdNFTTableRef, fwdNFTChain(name)); err != nil {
				return s, fmt.Errorf("list rules of inet %s %s: %w", fwdNFTTable, name, err)
			}
		}
		if !deleg {
			return s, nil
		}
		// iptables-nft's filter tables, where a FORWARD chain may drop by
		// default.
		for _, f := range nftnl.Families {
			d, err := readDeleg(c, f.Nft())
			if err != nil {
				return s, err
			}
			s.deleg[f] = d
		}
		return s, nil
	})
}

func readDeleg(c *nftables.Conn, tf nftables.TableFamily) (delegState, error) {
	var d delegState
	all, err := c.ListChainsOfTableFamily(tf)
	if err != nil {
		return d, fmt.Errorf("list chains of family %d: %w", tf, nftnl.NftUnsupported(err))
	}
	for _, ch := range all {
		if ch.Table != nil && ch.Table.Name == "filter" && ch.Name == "FORWARD" &&
			ch.Hooknum != nil && *ch.Hooknum == *nftables.ChainHookForward {
			d.chain = ch
		}
	}
	if d.chain == nil {
		return d, nil
	}
	rs, err := c.GetRules(d.chain.Table, d.chain)
	if err != nil {
		return d, fmt.Errorf("list rules of filter FORWARD (family %d): %w", tf, err)
	}
	d.dropsRest = d.chain.Policy != nil && *d.chain.Policy == nftables.ChainPolicyDrop
	if n := len(rs); n > 0 {
		switch e := rs[n-1].Exprs[len(rs[n-1].Exprs)-1].(type) {
		case *expr.Verdict:
			d.dropsRest = d.dropsRest || e.Kind == expr.VerdictDrop
		case *expr.Target:
			d.dropsRest = d.dropsRest || e.Name == "REJECT" || e.Name == "DROP"
		}
	}
	for _, r := range rs {
		if nftnl.NftRuleFrom(r).Comment == fwdDelegComment {
			d.ours = append(d.ours, r)
		}
	}
	return d, nil
}

func keysOf(rs []*nftables.Rule) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = kernelKey(r)
	}
	return out
}

func wantKeys(rs []fwdRule) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.key()
	}
	return out
}

func addrFamilies(addrs []net.IP) []nftnl.Family {
	var out []nftnl.Family
	for _, f := range nftnl.Families {
		if len(byFamilyIP(addrs)[f]) > 0 {
			out = append(out, f)
		}
	}
	return out
}

// missing lists what of the shared parts r needs is absent from s, as
// "<where>: <rule>" texts.
func (r ForwardRules) nftMissingShared(s fwdState) []string {
	var out []string
	where := "inet " + fwdNFTTable + " "
	base := s.chains[fwdNFTBase]
	switch {
	case base == nil:
		out = append(out, where+"chain "+fwdNFTBase)
	case base.Hooknum == nil || *base.Hooknum != *nftables.ChainHookForward || base.Type != nftables.ChainTypeFilter ||
		base.Priority == nil || *base.Priority != fwdNFTPriority:
		out = append(out, where+"chain "+fwdNFTBase+" as a filter forward chain at priority filter - 10")
	case !slices.Equal(keysOf(s.rules[fwdNFTBase]), wantKeys(fwdNFTBaseRules(r.markBit()))):
		for _, w := range fwdNFTBaseRules(r.markBit()) {
			out = append(out, where+fwdNFTBase+": "+w.String()+" (the base chain's rules, in order)")
		}
	}
	for _, name := range fwdNFTChains {
		if s.chains[name] == nil {
			out = append(out, where+"chain "+name)
		}
	}
	iso, isoOut := fwdNFTIsoRules(r)
	for name, want := range map[string][]fwdRule{fwdNFTIso: iso, fwdNFTIsoOut: isoOut} {
		have := keysOf(s.rules[name])
		for _, w := range want {
			if !slices.Contains(have, w.key()) {
				out = append(out, where+name+": "+w.String())
			}
		}
	}
	for _, f := range addrFamilies(r.Addrs) {
		d := s.deleg[f]
		if d.chain != nil && d.dropsRest && !slices.Contains(keysOf(d.ours), fwdDelegRule(r.markBit()).key()) {
			out = append(out, fmt.Sprintf("%s filter FORWARD (drops by default): %s (first)", map[nftnl.Family]string{nftnl.IPv4: "ip", nftnl.IPv6: "ip6"}[f], fwdDelegRule(r.markBit())))
		}
	}
	slices.Sort(out)
	return out
}

func (m *nftablesForward) Setup(r ForwardRules) error {
	_, err := m.SetupUndoable(r)
	return err
}

func (m *nftablesForward) SetupUndoable(r ForwardRules) (undo func() error, err error) {
	prior, err := m.setup(r)
	if err != nil {
		return nil, err
	}
	return func() error { return m.restoreOwn(r.Owner, prior) }, nil
}

// setup is Setup, one batch the kernel applies whole or not at all; it
// returns o's rules in the allow chain before it (handles included), for
// the undo.
func (m *nftablesForward) setup(r ForwardRules) (prior []*nftables.Rule, err error) {
	if r.MarkBit < 0 || r.MarkBit > 31 {
		return nil, fmt.Errorf("nftablesMarkBit: %d out of range 0-31", r.MarkBit)
	}
	c, err := nftnl.NewNFTConn()
	if err != nil {
		return nil, err
	}
	defer c.CloseLasting()
	what := "set up nftables forward rules for " + r.Owner.String()
	s, err := m.read(c, nil, true)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	shared := len(r.nftMissingShared(s)) > 0
	if shared {
		_ = os.MkdirAll(filepath.Dir(fwdLockFile), 0o700) // Lock reports a missing directory
		lock, err := filelock.Lock(fwdLockFile, 0o600)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		defer lock.Close()
		if s, err = m.read(c, nil, true); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		shared = len(r.nftMissingShared(s)) > 0
	}
	changed := false
	if shared {
		if err := m.queueShared(c, r, s); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		changed = true
	}
	want := fwdNFTAllowRules(r)
	have := nftnl.OwnedRules(s.rules[fwdNFTAllow], r.Owner)
	if haveKeys, wantKeys := keysOf(have), wantKeys(want); !slices.Equal(haveKeys, wantKeys) {
		// In place: a rule of r's that is there stays (a repeated ADD,
		// check --repair: issue 29), only stale ones go and missing ones
		// are added, in one batch.
		for i, h := range have {
			if !slices.Contains(wantKeys, haveKeys[i]) || slices.Index(haveKeys, haveKeys[i]) != i {
				if err := c.DelRule(h); err != nil {
					return nil, fmt.Errorf("%s: delete stale rule: %w", what, err)
				}
			}
		}
		for _, w := range want {
			if !slices.Contains(haveKeys, w.key()) {
				c.AddRule(&nftables.Rule{Table: fwdNFTTableRef, Chain: fwdNFTChain(fwdNFTAllow), Exprs: w.exprs, UserData: w.userData()})
			}
		}
		changed = true
	}
	if err := nftnl.FlushQueued(c, changed); err != nil {
		return nil, fmt.Errorf("%s in inet %s: %w", what, fwdNFTTable, err)
	}
	return have, nil
}

// queueShared queues what makes the shared parts match r: the table, the
// chains (regular ones first, as the base chain jumps to them), the base
// rules (rewritten whole when they differ), the missing isolation rules,
// and the delegation rule where iptables-nft's FORWARD drops by default.
func (m *nftablesForward) queueShared(c *nftables.Conn, r ForwardRules, s fwdState) error {
	c.AddTable(fwdNFTTableRef)
	for _, name := range fwdNFTChains {
		c.AddChain(fwdNFTChain(name))
	}
	base := c.AddChain(fwdNFTChain(fwdNFTBase))
	if want := fwdNFTBaseRules(r.markBit()); !slices.Equal(keysOf(s.rules[fwdNFTBase]), wantKeys(want)) {
		c.FlushChain(base)
		for _, w := range want {
			c.AddRule(&nftables.Rule{Table: fwdNFTTableRef, Chain: base, Exprs: w.exprs})
		}
	}
	iso, isoOut := fwdNFTIsoRules(r)
	for name, want := range map[string][]fwdRule{fwdNFTIso: iso, fwdNFTIsoOut: isoOut} {
		have := keysOf(s.rules[name])
		for _, w := range want {
			if !slices.Contains(have, w.key()) {
				c.AddRule(&nftables.Rule{Table: fwdNFTTableRef, Chain: fwdNFTChain(name), Exprs: w.exprs})
			}
		}
	}
	deleg := fwdDelegRule(r.markBit())
	for _, f := range addrFamilies(r.Addrs) {
		d := s.deleg[f]
		if d.chain == nil || !d.dropsRest || slices.Contains(keysOf(d.ours), deleg.key()) {
			continue
		}
		for _, old := range d.ours { // another mark bit: replaced
			if err := c.DelRule(old); err != nil {
				return err
			}
		}
		c.InsertRule(&nftables.Rule{Table: d.chain.Table, Chain: d.chain, Exprs: deleg.exprs, UserData: deleg.userData()})
	}
	return nil
}

// Teardown removes o's rules from the allow chain; the nftables backend
// has no upstream form, so addrs is not needed. The batch fails as a
// whole with ENOENT when a rule it deletes went meanwhile (a concurrent
// teardown of the same owner): it reads again.
func (m *nftablesForward) Teardown(o netfilter.Owner, _ []net.IP) error {
	return m.deleteAllow("tear down nftables forward rules for "+o.String(), func(cm netfilter.NftOwnerComment) bool { return cm.Owns(o) })
}

// GC removes the rules of network whose owner is not in keep.
func (m *nftablesForward) GC(network string, keep []netfilter.Owner) error {
	return m.deleteAllow(fmt.Sprintf("gc nftables forward rules of network %q", network), func(cm netfilter.NftOwnerComment) bool {
		return cm.InNetwork(network) && !slices.ContainsFunc(keep, func(o netfilter.Owner) bool { return o.Network == network && cm.Owns(o) })
	})
}

func (m *nftablesForward) deleteAllow(what string, match func(netfilter.NftOwnerComment) bool) error {
	const attempts = 3
	for i := 1; ; i++ {
		err := m.deleteAllowOnce(match)
		if err == nil || errors.Is(err, netfilter.ErrUnavailable) || !errors.Is(err, unix.ENOENT) || i == attempts {
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			return nil
		}
	}
}

func (m *nftablesForward) deleteAllowOnce(match func(netfilter.NftOwnerComment) bool) error {
	c, err := nftnl.NewNFTConn()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	s, err := m.read(c, []string{fwdNFTAllow}, false)
	if err != nil {
		return err
	}
	n := 0
	for _, r := range s.rules[fwdNFTAllow] {
		if cm, ok := netfilter.ParseNFTComment(nftnl.NftRuleFrom(r).Comment); ok && match(cm) {
			if err := c.DelRule(r); err != nil {
				return err
			}
			n++
		}
	}
	if n == 0 {
		return nil
	}
	return c.Flush()
}

func (m *nftablesForward) Check(r ForwardRules) error {
	c, err := nftnl.NewNFTConn()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	s, err := m.read(c, nil, true)
	if err != nil {
		return fmt.Errorf("check nftables forward rules of %s: %w", r.Owner, err)
	}
	var miss []error
	for _, l := range r.nftMissingShared(s) {
		miss = append(miss, fmt.Errorf("%w: %s", netfilter.ErrMissing, l))
	}
	have := keysOf(nftnl.OwnedRules(s.rules[fwdNFTAllow], r.Owner))
	for _, w := range fwdNFTAllowRules(r) {
		if !slices.Contains(have, w.key()) {
			miss = append(miss, fmt.Errorf("%w: inet %s %s: %s", netfilter.ErrMissing, fwdNFTTable, fwdNFTAllow, w))
		}
	}
	if len(miss) > 0 {
		return fmt.Errorf("nftables forward rules of %s: %w", r.Owner, errors.Join(miss...))
	}
	return nil
}
