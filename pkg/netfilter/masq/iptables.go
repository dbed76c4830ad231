package masq

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// iptablesMasq is the iptables backend. It runs iptables-restore (one
// process per family and change: the whole attachment is one transaction of
// the nat table) and iptables-save to read the current state, never a string
// of single-rule iptables calls.
//
// Setup costs one process per family on a clean table; two more when the
// chain already exists (read, then reconcile). With iptables-nft, where
// the nat table is already there and the chain is not, it costs none: the
// rules go over netlink as iptables-nft encodes them (setupNFT). Check
// reads them over netlink there too (checkNFT), and with iptables-save
// (one process per family) otherwise or when something is missing. GC
// reads with iptables-save and writes only when there is something to
// change. Teardown does the same for each
// family whose chain may exist; with iptables-nft it first asks nf_tables
// over netlink and skips families without the chain, and deletes a chain
// that goes as a whole over netlink too (teardownNFT), so a DEL costs no
// process unless another interface of the container shares the chain
// (then two: read + delete).
type iptablesMasq struct {
	*iptables.Runner
	// failFamily, when set, is asked before each family's change whether
	// it shall fail (tests: a later family's failure after an earlier one
	// went through).
	failFamily func(f nftnl.Family) error
	// exclude: destinations not masqueraded besides the container's
	// subnet (ipMasqExcludeCIDRs); Setup and Check only.
	exclude []*net.IPNet
}

func newIPTablesMasq() *iptablesMasq { return &iptablesMasq{Runner: &iptables.Runner{}} }

func (m *iptablesMasq) Backend() string { return netfilter.BackendIPTables }

func (m *iptablesMasq) Setup(o netfilter.Owner, addrs []*net.IPNet) error {
	_, err := m.SetupUndoable(o, addrs)
	return err
}

func (m *iptablesMasq) SetupUndoable(o netfilter.Owner, addrs []*net.IPNet) (undo func() error, err error) {
	if err := netfilter.CheckIPTablesComment(o); err != nil {
		return nil, err
	}
	unlock, err := m.LockChains(netfilter.IptablesChain(o))
	if err != nil {
		return nil, fmt.Errorf("set up masquerade for %s: %w", o, err)
	}
	defer unlock()
	byFam := nftnl.ByFamily(addrs)
	var fams []nftnl.Family
	for _, f := range nftnl.Families {
		if len(byFam[f]) > 0 {
			fams = append(fams, f)
		}
	}
	// A family done before another failed goes back to what its chain
	// held, or, where there was no chain, loses o's rules (teardownFamily
	// removes only o's).
	restore := func(f nftnl.Family, w iptables.ChainSnapshot) error { return m.restoreFamily(o, f, w) }
	done, err := iptables.FamilyStep{Fail: m.failFamily, Restore: restore,
		Setup: func(f nftnl.Family) (iptables.ChainSnapshot, error) { return m.setupFamily(o, f, byFam[f]) },
	}.SetupFamilies(fams)
	if err != nil {
		return nil, err
	}
	return func() error {
		return m.RestoreFamilies([]string{netfilter.IptablesChain(o)}, "masquerade of "+o.String(), done, restore)
	}, nil
}

// restoreFamily takes f's nat table back to w for o's chain; the caller
// holds the chain's lock.
func (m *iptablesMasq) restoreFamily(o netfilter.Owner, f nftnl.Family, w iptables.ChainSnapshot) error {
	if !w.Exists {
		return m.teardownFamily(o, f)
	}
	t, err := m.save(f)
	if err != nil {
		return err
	}
	return m.Restore(f, w.RestoreLines(iptables.NatTable(t)))
}

// setupFamily installs the rules of o for addrs (all of family f) and
// returns what o's chain held before (nothing when it was absent). It first
// tries the one-process path that only works on a clean table.
func (m *iptablesMasq) setupFamily(o netfilter.Owner, f nftnl.Family, addrs []*net.IPNet) (iptables.ChainSnapshot, error) {
	if err := m.Usable(f); err != nil {
		return iptables.ChainSnapshot{}, err
	}
	want := desiredIPTables(o, f, addrs, m.exclude...)
	if m.setupNFT(f, want) {
		return iptables.ChainSnapshot{}, nil
	}
	firstErr := m.Restore(f, want.freshLines())
	if firstErr == nil {
		return iptables.ChainSnapshot{}, nil // its "-N" made the chain
	}
	// Most likely the chain exists (a repeated ADD); read and reconcile.
	t, err := m.save(f)
	if err != nil {
		return iptables.ChainSnapshot{}, fmt.Errorf("set up %s masquerade for %s: %w", f, o, errors.Join(firstErr, err))
	}
	was := iptables.Snapshot(iptables.NatTable(t), want.chain, "POSTROUTING")
	lines := t.mergeLines(o, f, want)
	if lines == nil {
		return was, nil
	}
	if err := m.Restore(f, lines); err != nil {
		return iptables.ChainSnapshot{}, fmt.Errorf("set up %s masquerade for %s in nat chain %s: %w", f, o, want.chain, err)
	}
	return was, nil
}

func (m *iptablesMasq) Teardown(o netfilter.Owner) error {
	return m.teardown(o, false)
}

// teardownIfUsable is Teardown for TeardownMasqAll: a family whose iptables
// cannot be used (binary missing, nat table not loadable) holds no rules.
func (m *iptablesMasq) teardownIfUsable(o netfilter.Owner) error {
	return m.teardown(o, true)
}

// teardown removes o's rules from every family whose iptables binary
// exists. With ifUsable, a failure in a family whose nat table cannot be
// used is no failure: nothing can have been installed there.
func (m *iptablesMasq) teardown(o netfilter.Owner, ifUsable bool) error {
	unlock, err := m.LockChains(netfilter.IptablesChain(o))
	if err != nil {
		return fmt.Errorf("tear down masquerade for %s: %w", o, err)
	}
	defer unlock()
	var errs []error
	for _, f := range nftnl.Families {
		if m.Usable(f) != nil {
			continue // no binary, no rules
		}
		err := m.teardownFamily(o, f)
		if err != nil && ifUsable {
			uerr := m.NatUsable(f)
			if errors.Is(uerr, netfilter.ErrUnavailable) {
				continue // this kernel has no nat table: nothing was installed
			}
			err = errors.Join(err, uerr) // the check failed for another reason: say both
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// teardownFamily expects the caller to hold the chain's lock.
func (m *iptablesMasq) teardownFamily(o netfilter.Owner, f nftnl.Family) error {
	chain := netfilter.IptablesChain(o)
	if m.ChainSurelyAbsent(f, chain) || m.teardownNFT(o, f) {
		return nil
	}
	t, err := m.save(f)
	if err != nil {
		return fmt.Errorf("tear down %s masquerade for %s: %w", f, o, err)
	}
	lines := t.teardownLines(o, f)
	if len(lines) == 0 {
		return nil
	}
	if err := m.Restore(f, lines); err != nil {
		return fmt.Errorf("delete %s nat chain %s of %s: %w", f, chain, o, err)
	}
	return nil
}

func (m *iptablesMasq) Check(o netfilter.Owner, addrs []*net.IPNet) error {
	var errs []error
	for f, as := range nftnl.ByFamily(addrs) {
		want := desiredIPTables(o, f, as, m.exclude...)
		if m.checkNFT(f, want) {
			continue
		}
		t, err := m.save(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("check %s masquerade for %s: %w", f, o, err))
			continue
		}
		for _, miss := range t.missing(want) {
			errs = append(errs, fmt.Errorf("%w: %s %s", netfilter.ErrMissing, f, miss))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("iptables masquerade of %s: %w", o, errors.Join(errs...))
	}
	return nil
}

func (m *iptablesMasq) GC(network string, keep []netfilter.Owner) error {
	var errs []error
	for _, f := range nftnl.Families {
		if m.Usable(f) != nil {
			continue
		}
		errs = append(errs, m.gcFamily(f, network, keep))
	}
	return errors.Join(errs...)
}

// gcFamily is GC for one family. When the nat table of f cannot be used
// here, the error wraps ErrUnavailable.
func (m *iptablesMasq) gcFamily(f nftnl.Family, network string, keep []netfilter.Owner) error {
	// Chains with a kept owner stay; in them, the interfaces not kept go.
	keepIfs := map[string]map[string]bool{}
	chainOwner := map[string]netfilter.Owner{}
	for _, o := range keep {
		if o.Network != network {
			continue
		}
		chain := netfilter.IptablesChain(o)
		if keepIfs[chain] == nil {
			keepIfs[chain], chainOwner[chain] = map[string]bool{}, o
		}
		keepIfs[chain][o.IfName] = true
	}
	t, err := m.save(f)
	if err != nil {
		if uerr := m.NatUsable(f); errors.Is(uerr, netfilter.ErrUnavailable) {
			err = uerr // say it is unusable here (ErrUnavailable), not just failing
		} else {
			err = errors.Join(err, uerr) // a real failure, whatever the check says
		}
		return fmt.Errorf("gc %s masquerade of network %q: %w", f, network, err)
	}
	plan := func(t natTable, only map[string][]string) map[string][]string {
		changes := map[string][]string{}
		for chain, nw := range t.ownedChains() {
			if nw != network {
				continue
			}
			if _, ok := only[chain]; only != nil && !ok {
				continue
			}
			lines := t.deleteLines(chain)
			if keepIfs[chain] != nil {
				lines = t.gcLines(chainOwner[chain], f, keepIfs[chain])
			}
			if len(lines) > 0 {
				changes[chain] = lines
			}
		}
		return changes
	}
	changes := plan(t, nil)
	if len(changes) == 0 {
		return nil
	}
	// A Setup or Teardown may be changing these chains: take their locks
	// (all at once; GC is the only holder of several) and read again.
	// Chains that appear meanwhile wait for the next GC.
	unlock, err := m.LockChains(slices.Collect(maps.Keys(changes))...)
	if err != nil {
		return fmt.Errorf("gc %s masquerade of network %q: %w", f, network, err)
	}
	defer unlock()
	if t, err = m.save(f); err != nil {
		return fmt.Errorf("gc %s masquerade of network %q: %w", f, network, err)
	}
	changes = plan(t, changes)
	var all []string
	for _, lines := range changes {
		all = append(all, lines...)
	}
	if len(all) == 0 || m.Restore(f, all) == nil {
		return nil
	}
	// One bad chain must not keep the others: retry them one by one.
	var errs []error
	for chain, lines := range changes {
		if err := m.Restore(f, lines); err != nil {
			errs = append(errs, fmt.Errorf("gc %s nat chain %s of network %q: %w", f, chain, network, err))
		}
	}
	return errors.Join(errs...)
}

// gcIfUsable is GC for GCMasqAll: a family whose iptables cannot be used
// (binary missing, nat table not loadable) holds no rules. It decides per
// family, so an unusable IPv6 nat table does not hide an IPv4 failure.
func (m *iptablesMasq) gcIfUsable(network string, keep []netfilter.Owner) error {
	var errs []error
	for _, f := range nftnl.Families {
		if m.Usable(f) != nil {
			continue
		}
		if err := m.gcFamily(f, network, keep); err != nil && !errors.Is(err, netfilter.ErrUnavailable) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
