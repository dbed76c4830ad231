package netfilter

import (
	"errors"
	"fmt"
	"net"
	"slices"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"
)

// nftablesMasq is the nftables backend. It speaks netlink directly: no nft
// process. Every change of one call goes to the kernel as one batch, which
// nf_tables applies entirely or not at all.
type nftablesMasq struct{}

func newNFTablesMasq() *nftablesMasq { return &nftablesMasq{} }

func (m *nftablesMasq) Backend() string { return BackendNFTables }

// conn opens a netlink socket for the whole call. The socket is created on
// the calling thread (nftables.Conn without NetNS dials in place), so it
// belongs to that thread's network namespace for its whole life, whichever
// thread later reads or writes it.
func (m *nftablesMasq) conn() (*nftables.Conn, error) {
	c, err := nftables.New(nftables.AsLasting())
	if err != nil {
		return nil, fmt.Errorf("nftables netlink: %w", nftUnsupported(err))
	}
	return c, nil
}

// nftUnsupported wraps err with ErrUnavailable when it says that this
// kernel has no nf_tables: no nfnetlink (EPROTONOSUPPORT), no nf_tables
// subsystem or family (EOPNOTSUPP, EAFNOSUPPORT). That is the one failure
// that proves no rule can exist; any other error (EPERM, ENOBUFS, a
// netlink that went away) says nothing about what the kernel holds, so
// callers must not read it as "nothing installed".
func nftUnsupported(err error) error {
	if errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EAFNOSUPPORT) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

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
func (m *nftablesMasq) read(c *nftables.Conn) (nftState, error) {
	return consistent(func() (nftState, error) { return m.readOnce(c) })
}

func (m *nftablesMasq) readOnce(c *nftables.Conn) (nftState, error) {
	var s nftState
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return s, fmt.Errorf("list inet chains: %w", nftUnsupported(err))
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

func renderAll(rs []*nftables.Rule) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = nftRuleFrom(r).String()
	}
	return out
}

func renderRules(rs []nftRule) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.String()
	}
	return out
}

// ownedBy returns the rules of the masquerade chain whose comment is o's,
// in upstream's form or our earlier one.
func ownedBy(rs []*nftables.Rule, o Owner) []*nftables.Rule {
	var out []*nftables.Rule
	for _, r := range rs {
		if c, ok := parseNFTComment(nftRuleFrom(r).comment); ok && c.owns(o) {
			out = append(out, r)
		}
	}
	return out
}

func (m *nftablesMasq) Setup(o Owner, addrs []*net.IPNet) error {
	want := nftMasqRules(o, addrs)
	if len(want) == 0 {
		return nil
	}
	c, err := m.conn()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	s, err := m.read(c)
	if err != nil {
		return fmt.Errorf("set up nftables masquerade for %s: %w", o, err)
	}

	// Adding an existing table or chain with the same definition is a no-op
	// for the kernel, so these are always part of the batch.
	c.AddTable(nftTable)
	base := c.AddChain(nftBase())
	masq := c.AddChain(nftMasq())

	if want := renderRules(nftBaseRules()); !slices.Equal(renderAll(s.baseRules), want) {
		c.FlushChain(base)
		for _, r := range nftBaseRules() {
			c.AddRule(&nftables.Rule{Table: nftTable, Chain: base, Exprs: r.exprs, UserData: r.userData()})
		}
	}
	have := ownedBy(s.masqRules, o)
	if !slices.Equal(renderAll(have), renderRules(want)) {
		for _, r := range have {
			if err := c.DelRule(r); err != nil {
				return fmt.Errorf("set up nftables masquerade for %s: delete stale rule: %w", o, err)
			}
		}
		for _, r := range want {
			c.AddRule(&nftables.Rule{Table: nftTable, Chain: masq, Exprs: r.exprs, UserData: r.userData()})
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("set up nftables masquerade for %s in inet %s: %w", o, nftTableName, err)
	}
	return nil
}

func (m *nftablesMasq) Teardown(o Owner) error {
	c, err := m.conn()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	return m.teardown(c, o)
}

func (m *nftablesMasq) teardown(c *nftables.Conn, o Owner) error {
	s, err := m.read(c)
	if err != nil {
		return fmt.Errorf("tear down nftables masquerade for %s: %w", o, err)
	}
	// The table and the base chain stay: other attachments (and upstream's
	// plugins) share them, and an empty masquerade chain costs nothing.
	have := ownedBy(s.masqRules, o)
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

func (m *nftablesMasq) Check(o Owner, addrs []*net.IPNet) error {
	c, err := m.conn()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	s, err := m.read(c)
	if err != nil {
		return fmt.Errorf("check nftables masquerade for %s: %w", o, err)
	}
	var miss []error
	where := "table inet " + nftTableName
	switch {
	case !s.base:
		miss = append(miss, fmt.Errorf("%w: %s chain %s", ErrMissing, where, nftBaseChain))
	case s.baseHook.Hooknum == nil || *s.baseHook.Hooknum != *nftables.ChainHookPostrouting ||
		s.baseHook.Type != nftables.ChainTypeNAT:
		miss = append(miss, fmt.Errorf("%w: %s chain %s as a nat postrouting chain", ErrMissing, where, nftBaseChain))
	default:
		have := renderAll(s.baseRules)
		for _, r := range renderRules(nftBaseRules()) {
			if !slices.Contains(have, r) {
				miss = append(miss, fmt.Errorf("%w: %s chain %s: %s", ErrMissing, where, nftBaseChain, r))
			}
		}
	}
	// A rule of our earlier releases (legacy comment) passes too: pods
	// set up before the switch to upstream's names stay checkable.
	have := renderAll(ownedBy(s.masqRules, o))
	for _, r := range nftMasqRules(o, addrs) {
		legacy := nftRule{exprs: r.exprs, comment: nftLegacyComment(o)}
		if !slices.Contains(have, r.String()) && !slices.Contains(have, legacy.String()) {
			miss = append(miss, fmt.Errorf("%w: %s chain %s: %s", ErrMissing, where, nftMasqChain, r))
		}
	}
	if len(miss) > 0 {
		return fmt.Errorf("nftables masquerade of %s: %w", o, errors.Join(miss...))
	}
	return nil
}

func (m *nftablesMasq) GC(network string, keep []Owner) error {
	c, err := m.conn()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	s, err := m.read(c)
	if err != nil {
		return fmt.Errorf("gc nftables masquerade of network %q: %w", network, err)
	}
	var kept []Owner
	for _, o := range keep {
		if o.Network == network {
			kept = append(kept, o)
		}
	}
	var stale []*nftables.Rule
	for _, r := range s.masqRules {
		c, ok := parseNFTComment(nftRuleFrom(r).comment)
		if ok && c.inNetwork(network) && !slices.ContainsFunc(kept, c.owns) {
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
			errs = append(errs, fmt.Errorf("gc nftables rule %q of network %q: %w", nftRuleFrom(r), network, err))
		}
	}
	return errors.Join(errs...)
}

// usable reports whether nf_tables answers here.
func (m *nftablesMasq) usable() error {
	c, err := m.conn()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	if _, err := c.ListTablesOfFamily(nftables.TableFamilyINet); err != nil {
		return fmt.Errorf("nftables: %w: %w", ErrUnavailable, err)
	}
	return nil
}

// teardownIfUsable is Teardown for TeardownMasqAll: without nf_tables there
// are no rules to remove. Any other failure is one (issue 8, defect 9: a
// refused dump, say EPERM, must not pass for "nothing installed").
func (m *nftablesMasq) teardownIfUsable(o Owner) error {
	err := m.Teardown(o)
	if errors.Is(err, ErrUnavailable) {
		return nil
	}
	return err
}

// gcIfUsable is GC for GCMasqAll: without nf_tables there are no rules to
// collect.
func (m *nftablesMasq) gcIfUsable(network string, keep []Owner) error {
	err := m.GC(network, keep)
	if errors.Is(err, ErrUnavailable) {
		return nil
	}
	return err
}
