package masq

import (
	"errors"
	"fmt"
	"net"
	"slices"

	"github.com/google/nftables"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// nftablesMasq is the nftables backend. It speaks netlink directly: no nft
// process. Every change of one call goes to the kernel as one batch, which
// nf_tables applies entirely or not at all.
type nftablesMasq struct {
	// exclude: destinations not masqueraded besides the container's
	// subnet (ipMasqExcludeCIDRs); Setup and Check only.
	exclude []*net.IPNet
}

func newNFTablesMasq() *nftablesMasq { return &nftablesMasq{} }

func (m *nftablesMasq) Backend() string { return netfilter.BackendNFTables }

// nftState is what the kernel holds of our table.
type nftState struct {
	base, masq bool            // the chains exist
	baseHook   *nftables.Chain // the base chain as the kernel reports it
	baseRules  []*nftables.Rule
	masqRules  []*nftables.Rule
}

// read lists our table's chains and their rules. A missing table or chain
// is an empty state, not an error. It lists all inet chains rather than
// asking for ours by name because google/nftables flattens the kernel's
// ENOENT into text for named lookups.
func (m *nftablesMasq) read(c *nftnl.NftConn) (nftState, error) {
	return nftnl.ConsistentOn(c.Nl, func() (nftState, error) { return m.readOnce(c.Conn) })
}

func (m *nftablesMasq) readOnce(c *nftables.Conn) (nftState, error) {
	var s nftState
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return s, fmt.Errorf("list inet chains: %w", nftnl.NftUnsupported(err))
	}
	for _, ch := range chains {
		if ch.Table == nil || ch.Table.Name != nftTableName {
			continue
		}
		switch ch.Name {
		case nftBaseChain:
			s.base, s.baseHook = true, ch
		case nftMasqChain:
			s.masq = true
		}
	}
	if s.base {
		if s.baseRules, err = c.GetRules(nftTable, nftBase()); err != nil {
			return s, fmt.Errorf("list rules of inet %s %s: %w", nftTableName, nftBaseChain, err)
		}
	}
	if s.masq {
		if s.masqRules, err = c.GetRules(nftTable, nftMasq()); err != nil {
			return s, fmt.Errorf("list rules of inet %s %s: %w", nftTableName, nftMasqChain, err)
		}
	}
	return s, nil
}

// setupRead is Setup's read of the base chain's rules and the masquerade
// chain's: the chains asked for by name (NFT_MSG_GETCHAIN, which costs the
// same however many chains other tables hold), then the rules of those
// that exist.
//
// Unlike read it takes no care that the view is one generation of the
// ruleset (see consistent), which under many parallel ADDs cost retries
// and a socket more. Setup's view only decides two things. Whether the
// base chain's rules need rewriting: a wrong view rewrites them, in one
// atomic batch, or leaves them as they are. And which of this attachment's
// own rules to replace: nobody else changes those, so a dump that others'
// commits interrupted can at worst skip one, which then stays beside its
// replacement until DEL (whose read is consistent) removes every rule of
// the attachment. A rule seen twice is deleted once.
func (m *nftablesMasq) setupRead(c *nftnl.NftConn) (nftState, error) {
	var s nftState
	for _, x := range []struct {
		chain *nftables.Chain
		there *bool
		rules *[]*nftables.Rule
	}{{nftBase(), &s.base, &s.baseRules}, {nftMasq(), &s.masq, &s.masqRules}} {
		there, err := nftnl.NftChainExistsIn(c.Nl, nftables.TableFamilyINet, nftTableName, x.chain.Name)
		if err != nil {
			return s, fmt.Errorf("look up inet %s %s: %w", nftTableName, x.chain.Name, nftnl.NftUnsupported(err))
		}
		if !there {
			continue
		}
		rs, err := c.GetRules(nftTable, x.chain)
		if err != nil {
			return s, fmt.Errorf("list rules of inet %s %s: %w", nftTableName, x.chain.Name, err)
		}
		*x.there, *x.rules = true, uniqueHandles(rs)
	}
	return s, nil
}

// uniqueHandles drops the repeats of a rule (same handle) that a dump
// interrupted by a commit can report.
func uniqueHandles(rs []*nftables.Rule) []*nftables.Rule {
	seen := make(map[uint64]bool, len(rs))
	out := rs[:0]
	for _, r := range rs {
		if !seen[r.Handle] {
			seen[r.Handle] = true
			out = append(out, r)
		}
	}
	return out
}

func renderAll(rs []*nftables.Rule) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = nftnl.NftRuleFrom(r).String()
	}
	return out
}

func renderRules(rs []nftnl.NftRule) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.String()
	}
	return out
}

func (m *nftablesMasq) Setup(o netfilter.Owner, addrs []*net.IPNet) error {
	_, err := m.SetupUndoable(o, addrs)
	return err
}

func (m *nftablesMasq) SetupUndoable(o netfilter.Owner, addrs []*net.IPNet) (undo func() error, err error) {
	want := nftMasqRules(o, addrs, m.exclude...)
	if len(want) == 0 {
		return func() error { return nil }, nil
	}
	var prior []*nftables.Rule // o's rules before, with their handles
	err = nftnl.WithNFT(func(c *nftnl.NftConn) error {
		s, err := m.setupRead(c)
		if err != nil {
			return fmt.Errorf("set up nftables masquerade for %s: %w", o, err)
		}
		prior = nftnl.OwnedRules(s.masqRules, o)
		err = m.setup(c, o, s, want)
		if err != nil && (s.base || s.masq) {
			// A chain seen a moment ago may have gone since (the table
			// removed by hand): once more, declaring every object.
			s.base, s.masq = false, false
			err = m.setup(c, o, s, want)
		}
		if err != nil {
			return fmt.Errorf("set up nftables masquerade for %s in inet %s: %w", o, nftTableName, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return func() error { return m.restore(o, prior) }, nil
}

// restore takes o's rules in the masquerade chain back to prior (the undo
// of SetupUndoable): a rule whose handle is not prior's was added by it and
// goes, a prior rule no longer there comes back; the others are not
// touched. On a fresh attachment this is Teardown.
func (m *nftablesMasq) restore(o netfilter.Owner, prior []*nftables.Rule) error {
	return nftnl.WithNFT(func(c *nftnl.NftConn) error {
		s, err := m.read(c)
		if err != nil {
			return fmt.Errorf("restore nftables masquerade of %s: %w", o, err)
		}
		return nftnl.RestoreRules(c.Conn, nftTable, nftMasq(), nftnl.OwnedRules(s.masqRules, o), prior, fmt.Sprintf("restore nftables masquerade of %s", o))
	})
}

// setup commits what Setup decided from s, the state setupRead saw.
//
// The table and a chain that s lacks are declared in the batch (adding
// one that exists with the same definition changes nothing); a chain that
// s holds is not. Declaring an existing chain is an update to the kernel,
// and an updated chain is freed only after an RCU grace period: the
// commit leaves cleanup work behind, and closing an nfnetlink socket
// waits for that work while holding the commit mutex of the namespace
// (see nftnl/conn.go). With many pods at once, each ADD's close then held up
// the others' commits and veth creations for about 10 ms. A commit that
// only adds rules leaves no such work.
func (m *nftablesMasq) setup(c *nftnl.NftConn, o netfilter.Owner, s nftState, want []nftnl.NftRule) error {
	have := nftnl.OwnedRules(s.masqRules, o)
	for _, r := range have {
		if r.Handle == 0 { // before anything is queued: nothing is left for a retry to send
			return fmt.Errorf("delete stale rule: the kernel reported it without a handle")
		}
	}
	c.AddTable(nftTable)
	base, masq := nftBase(), nftMasq()
	if !s.base {
		base = c.AddChain(base)
	}
	if !s.masq {
		masq = c.AddChain(masq)
	}
	if want := renderRules(nftBaseRules()); !slices.Equal(renderAll(s.baseRules), want) {
		c.FlushChain(base)
		for _, r := range nftBaseRules() {
			c.AddRule(&nftables.Rule{Table: nftTable, Chain: base, Exprs: r.Exprs, UserData: r.UserData()})
		}
	}
	if !slices.Equal(renderAll(have), renderRules(want)) {
		for _, r := range have {
			_ = c.DelRule(r) // fails only without a handle, refused above
		}
		for _, r := range want {
			c.AddRule(&nftables.Rule{Table: nftTable, Chain: masq, Exprs: r.Exprs, UserData: r.UserData()})
		}
	}
	return c.Flush()
}

func (m *nftablesMasq) Teardown(o netfilter.Owner) error {
	return nftnl.WithNFT(func(c *nftnl.NftConn) error {
		return m.teardown(c, o)
	})
}

func (m *nftablesMasq) teardown(c *nftnl.NftConn, o netfilter.Owner) error {
	s, err := m.read(c)
	if err != nil {
		return fmt.Errorf("tear down nftables masquerade for %s: %w", o, err)
	}
	// The table and the base chain stay: other attachments (and upstream's
	// plugins) share them, and an empty masquerade chain costs nothing.
	have := nftnl.OwnedRules(s.masqRules, o)
	if len(have) == 0 {
		return nil
	}
	for _, r := range have {
		if err := c.DelRule(r); err != nil {
			return fmt.Errorf("tear down nftables masquerade for %s: %w", o, err)
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("tear down nftables masquerade for %s in inet %s: %w", o, nftTableName, err)
	}
	return nil
}

func (m *nftablesMasq) Check(o netfilter.Owner, addrs []*net.IPNet) error {
	return nftnl.WithNFT(func(c *nftnl.NftConn) error {
		s, err := m.read(c)
		if err != nil {
			return fmt.Errorf("check nftables masquerade for %s: %w", o, err)
		}
		var miss []error
		where := "table inet " + nftTableName
		switch {
		case !s.base:
			miss = append(miss, fmt.Errorf("%w: %s chain %s", netfilter.ErrMissing, where, nftBaseChain))
		case s.baseHook.Hooknum == nil || *s.baseHook.Hooknum != *nftables.ChainHookPostrouting ||
			s.baseHook.Type != nftables.ChainTypeNAT:
			miss = append(miss, fmt.Errorf("%w: %s chain %s as a nat postrouting chain", netfilter.ErrMissing, where, nftBaseChain))
		default:
			have := renderAll(s.baseRules)
			for _, r := range renderRules(nftBaseRules()) {
				if !slices.Contains(have, r) {
					miss = append(miss, fmt.Errorf("%w: %s chain %s: %s", netfilter.ErrMissing, where, nftBaseChain, r))
				}
			}
		}
		// A rule of our earlier releases (legacy comment) passes too: pods
		// set up before the switch to upstream's names stay checkable.
		have := renderAll(nftnl.OwnedRules(s.masqRules, o))
		for _, r := range nftMasqRules(o, addrs, m.exclude...) {
			legacy := nftnl.NftRule{Exprs: r.Exprs, Comment: netfilter.NftLegacyComment(o)}
			if !slices.Contains(have, r.String()) && !slices.Contains(have, legacy.String()) {
				miss = append(miss, fmt.Errorf("%w: %s chain %s: %s", netfilter.ErrMissing, where, nftMasqChain, r))
			}
		}
		if len(miss) > 0 {
			return fmt.Errorf("nftables masquerade of %s: %w", o, errors.Join(miss...))
		}
		return nil
	})
}

func (m *nftablesMasq) GC(network string, keep []netfilter.Owner) error {
	return nftnl.WithNFT(func(c *nftnl.NftConn) error {
		s, err := m.read(c)
		if err != nil {
			return fmt.Errorf("gc nftables masquerade of network %q: %w", network, err)
		}
		var kept []netfilter.Owner
		for _, o := range keep {
			if o.Network == network {
				kept = append(kept, o)
			}
		}
		var stale []*nftables.Rule
		for _, r := range s.masqRules {
			c, ok := netfilter.ParseNFTComment(nftnl.NftRuleFrom(r).Comment)
			if ok && c.InNetwork(network) && !slices.ContainsFunc(kept, c.Owns) {
				stale = append(stale, r)
			}
		}
		if len(stale) == 0 {
			return nil
		}
		for _, r := range stale {
			if err := c.DelRule(r); err != nil {
				return fmt.Errorf("gc nftables masquerade of network %q: %w", network, err)
			}
		}
		if c.Flush() == nil {
			return nil
		}
		// The batch failed as a whole; retry rule by rule so one bad rule
		// (say, deleted meanwhile) does not keep the others.
		var errs []error
		for _, r := range stale {
			if err := c.DelRule(r); err == nil {
				err = c.Flush()
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("gc nftables rule %q of network %q: %w", nftnl.NftRuleFrom(r), network, err))
			}
		}
		return errors.Join(errs...)
	})
}

// usable reports whether nf_tables answers here.
func (m *nftablesMasq) usable() error { return nftnl.Usable() }

// teardownIfUsable is Teardown for TeardownMasqAll: without nf_tables there
// are no rules to remove. Any other failure is one (issue 8, defect 9: a
// refused dump, say EPERM, must not pass for "nothing installed").
func (m *nftablesMasq) teardownIfUsable(o netfilter.Owner) error {
	err := m.Teardown(o)
	if errors.Is(err, netfilter.ErrUnavailable) {
		return nil
	}
	return err
}

// gcIfUsable is GC for GCMasqAll: without nf_tables there are no rules to
// collect.
func (m *nftablesMasq) gcIfUsable(network string, keep []netfilter.Owner) error {
	err := m.GC(network, keep)
	if errors.Is(err, netfilter.ErrUnavailable) {
		return nil
	}
	return err
}
