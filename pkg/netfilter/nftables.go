package netfilter

import (
	"errors"
	"fmt"
	"net"
	"slices"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// nftablesMasq is the nftables backend. It speaks netlink directly: no nft
// process. Every change of one call goes to the kernel as one batch, which
// nf_tables applies entirely or not at all.
type nftablesMasq struct{}

func newNFTablesMasq() *nftablesMasq { return &nftablesMasq{} }

func (m *nftablesMasq) Backend() string { return BackendNFTables }

// nftConn is a lasting nftables connection together with its socket, on
// which this package sends its own single requests (a chain, the
// generation) between the connection's operations, so that one change
// opens, and closes, one nfnetlink socket (see nfconn.go for what a close
// costs). Not for concurrent use.
type nftConn struct {
	*nftables.Conn
	nl *netlink.Conn
}

// newNFTConn opens a lasting nftables connection in the calling thread's
// network namespace, for callers that send no single requests of their own.
func newNFTConn() (*nftables.Conn, error) {
	c, err := openNFT()
	if err != nil {
		return nil, err
	}
	return c.Conn, nil
}

// openNFT opens an nftConn in the calling thread's network namespace. The
// socket is created on the calling thread (nftables.Conn without NetNS
// dials in place), so it belongs to that namespace for its whole life,
// whichever thread later reads or writes it.
func openNFT() (*nftConn, error) {
	var nl *netlink.Conn
	c, err := nftables.New(nftables.AsLasting(), nftables.WithSockOptions(func(x *netlink.Conn) error {
		nl = x
		return nil
	}))
	if err != nil {
		return nil, fmt.Errorf("nftables netlink: %w", nftUnsupported(err))
	}
	if nl == nil {
		_ = c.CloseLasting() // best effort: nothing was sent on it
		return nil, errors.New("nftables netlink: the connection's socket was not handed over")
	}
	return &nftConn{Conn: c, nl: nl}, nil
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
func (m *nftablesMasq) read(c *nftConn) (nftState, error) {
	return consistentOn(c.nl, func() (nftState, error) { return m.readOnce(c.Conn) })
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
func (m *nftablesMasq) setupRead(c *nftConn) (nftState, error) {
	var s nftState
	for _, x := range []struct {
		chain *nftables.Chain
		there *bool
		rules *[]*nftables.Rule
	}{{nftBase(), &s.base, &s.baseRules}, {nftMasq(), &s.masq, &s.masqRules}} {
		there, err := nftChainExistsIn(c.nl, nftables.TableFamilyINet, nftTableName, x.chain.Name)
		if err != nil {
			return s, fmt.Errorf("look up inet %s %s: %w", nftTableName, x.chain.Name, nftUnsupported(err))
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
	return withNFT(func(c *nftConn) error {
		s, err := m.setupRead(c)
		if err != nil {
			return fmt.Errorf("set up nftables masquerade for %s: %w", o, err)
		}
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
}

// setup commits what Setup decided from s, the state setupRead saw.
//
// The table and a chain that s lacks are declared in the batch (adding
// one that exists with the same definition changes nothing); a chain that
// s holds is not. Declaring an existing chain is an update to the kernel,
// and an updated chain is freed only after an RCU grace period: the
// commit leaves cleanup work behind, and closing an nfnetlink socket
// waits for that work while holding the commit mutex of the namespace
// (see nfconn.go). With many pods at once, each ADD's close then held up
// the others' commits and veth creations for about 10 ms. A commit that
// only adds rules leaves no such work.
func (m *nftablesMasq) setup(c *nftConn, o Owner, s nftState, want []nftRule) error {
	have := ownedBy(s.masqRules, o)
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
			c.AddRule(&nftables.Rule{Table: nftTable, Chain: base, Exprs: r.exprs, UserData: r.userData()})
		}
	}
	if !slices.Equal(renderAll(have), renderRules(want)) {
		for _, r := range have {
			_ = c.DelRule(r) // fails only without a handle, refused above
		}
		for _, r := range want {
			c.AddRule(&nftables.Rule{Table: nftTable, Chain: masq, Exprs: r.exprs, UserData: r.userData()})
		}
	}
	return c.Flush()
}

func (m *nftablesMasq) Teardown(o Owner) error {
	return withNFT(func(c *nftConn) error {
		return m.teardown(c, o)
	})
}

func (m *nftablesMasq) teardown(c *nftConn, o Owner) error {
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
	return withNFT(func(c *nftConn) error {
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
	})
}

func (m *nftablesMasq) GC(network string, keep []Owner) error {
	return withNFT(func(c *nftConn) error {
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
	})
}

// usable reports whether nf_tables answers here.
func (m *nftablesMasq) usable() error { return nftUsable(nftTableName) }

// nftUsable reports whether nf_tables and its inet family work in the
// calling thread's namespace, asking for table (there or not).
func nftUsable(table string) error {
	// One GETTABLE of the inet family on the shared request socket: the
	// table there or not (ENOENT) proves nf_tables and its inet family
	// work, without a socket of its own to close (see nfconn.go).
	nl, done, err := requestConn()
	if err != nil {
		return fmt.Errorf("nftables: %w: %w", ErrUnavailable, err)
	}
	defer done()
	if _, err := nftTableExistsIn(nl, nftables.TableFamilyINet, table); err != nil {
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
