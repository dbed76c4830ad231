package netfilter

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"sync"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
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
	*iptRunner
}

// iptRunner runs the iptables tools of one variant: iptables-restore
// batches and iptables-save reads, with the chain locks, the prestarted
// restore, and the probes of what the kernel holds. The masquerade, port
// forwarding and firewall backends share it.
type iptRunner struct {
	// variant picks the binaries: "" for whatever iptables-restore is on
	// PATH (Debian's alternatives), "legacy" or "nft" for
	// iptables-legacy-restore / iptables-nft-restore. Tests set it to run
	// both.
	variant string
	// run executes one command with stdin and returns its stdout; nil means
	// runCommand. Tests count processes through it.
	run func(name string, args []string, stdin []byte) ([]byte, error)
	// lockDir holds the chain locks; "" means iptablesLockDir. Tests
	// point it at a directory of their own to count its files.
	lockDir string
	// natProbe replaces natUsable's look at the nat table when set: tests
	// inject the error iptables gives when the check fails.
	natProbe func(f family) error
	// noNFT turns the netlink short ways off (setupNFT, the teardownNFTs,
	// portmap setup's sharedViewNFT), so tests can compare them with the
	// iptables-restore and iptables-save paths.
	noNFT bool

	mu         sync.Mutex
	prestarted *prestartedRestore // see Prestart
}

func newIPTablesMasq() *iptablesMasq { return &iptablesMasq{iptRunner: &iptRunner{}} }

func (m *iptablesMasq) Backend() string { return BackendIPTables }

// tool returns the binary name of tool ("restore" or "save") for f.
func (m *iptRunner) tool(f family, tool string) string {
	base := "iptables"
	if f == ipv6 {
		base = "ip6tables"
	}
	if m.variant != "" {
		return base + "-" + m.variant + "-" + tool
	}
	return base + "-" + tool
}

// usable reports whether both binaries for f exist; their absence means no
// rules of that family can exist either.
func (m *iptRunner) usable(f family) error {
	for _, t := range []string{"restore", "save"} {
		if _, err := findTool(m.tool(f, t)); err != nil {
			return fmt.Errorf("%s: %w: %w", m.tool(f, t), ErrUnavailable, err)
		}
	}
	return nil
}

// restore applies lines to the nat table of f as one transaction: either
// every line takes effect or none does. -w waits for the xtables lock that
// legacy iptables takes, instead of failing when another plugin holds it.
func (m *iptRunner) restore(f family, lines []string) error {
	_, err := m.exec(m.tool(f, "restore"), restoreArgs, restorePayload(lines))
	return err
}

// save reads the nat table of f.
func (m *iptRunner) save(f family) (natTable, error) {
	out, err := m.exec(m.tool(f, "save"), []string{"-t", "nat"}, nil)
	if err != nil {
		return natTable{}, err
	}
	return parseNATSave(out)
}

func (m *iptablesMasq) Setup(o Owner, addrs []*net.IPNet) error {
	if err := checkIPTablesComment(o); err != nil {
		return err
	}
	unlock, err := m.lockChains(iptablesChain(o))
	if err != nil {
		return fmt.Errorf("set up masquerade for %s: %w", o, err)
	}
	defer unlock()
	var done []family
	for _, f := range families {
		as := byFamily(addrs)[f]
		if len(as) == 0 {
			continue
		}
		if err := m.setupFamily(o, f, as); err != nil {
			// Leave no family half set up: undo this interface's rules in
			// every family done so far, merged into another interface's
			// chain or freshly made (teardownFamily removes only o's).
			for _, df := range done {
				if uerr := m.teardownFamily(o, df); uerr != nil {
					err = errors.Join(err, fmt.Errorf("undo %s: %w", df, uerr))
				}
			}
			return err
		}
		done = append(done, f)
	}
	return nil
}

// setupFamily installs the rules of o for addrs (all of family f). It first
// tries the one-process path that only works on a clean table.
func (m *iptablesMasq) setupFamily(o Owner, f family, addrs []*net.IPNet) error {
	if err := m.usable(f); err != nil {
		return err
	}
	want := desiredIPTables(o, f, addrs)
	if m.setupNFT(f, want) {
		return nil
	}
	firstErr := m.restore(f, want.freshLines())
	if firstErr == nil {
		return nil
	}
	// Most likely the chain exists (a repeated ADD); read and reconcile.
	t, err := m.save(f)
	if err != nil {
		return fmt.Errorf("set up %s masquerade for %s: %w", f, o, errors.Join(firstErr, err))
	}
	lines := t.mergeLines(o, f, want)
	if lines == nil {
		return nil
	}
	if err := m.restore(f, lines); err != nil {
		return fmt.Errorf("set up %s masquerade for %s in nat chain %s: %w", f, o, want.chain, err)
	}
	return nil
}

func (m *iptablesMasq) Teardown(o Owner) error {
	return m.teardown(o, false)
}

// teardownIfUsable is Teardown for TeardownMasqAll: a family whose iptables
// cannot be used (binary missing, nat table not loadable) holds no rules.
func (m *iptablesMasq) teardownIfUsable(o Owner) error {
	return m.teardown(o, true)
}

// teardown removes o's rules from every family whose iptables binary
// exists. With ifUsable, a failure in a family whose nat table cannot be
// used is no failure: nothing can have been installed there.
func (m *iptablesMasq) teardown(o Owner, ifUsable bool) error {
	unlock, err := m.lockChains(iptablesChain(o))
	if err != nil {
		return fmt.Errorf("tear down masquerade for %s: %w", o, err)
	}
	defer unlock()
	var errs []error
	for _, f := range families {
		if m.usable(f) != nil {
			continue // no binary, no rules
		}
		err := m.teardownFamily(o, f)
		if err != nil && ifUsable {
			uerr := m.natUsable(f)
			if errors.Is(uerr, ErrUnavailable) {
				continue // this kernel has no nat table: nothing was installed
			}
			err = errors.Join(err, uerr) // the check failed for another reason: say both
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// teardownFamily expects the caller to hold the chain's lock.
func (m *iptablesMasq) teardownFamily(o Owner, f family) error {
	chain := iptablesChain(o)
	if m.chainSurelyAbsent(f, chain) || m.teardownNFT(o, f) {
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
	if err := m.restore(f, lines); err != nil {
		return fmt.Errorf("delete %s nat chain %s of %s: %w", f, chain, o, err)
	}
	return nil
}

func (m *iptablesMasq) Check(o Owner, addrs []*net.IPNet) error {
	var errs []error
	for f, as := range byFamily(addrs) {
		want := desiredIPTables(o, f, as)
		if m.checkNFT(f, want) {
			continue
		}
		t, err := m.save(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("check %s masquerade for %s: %w", f, o, err))
			continue
		}
		for _, miss := range t.missing(want) {
			errs = append(errs, fmt.Errorf("%w: %s %s", ErrMissing, f, miss))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("iptables masquerade of %s: %w", o, errors.Join(errs...))
	}
	return nil
}

func (m *iptablesMasq) GC(network string, keep []Owner) error {
	var errs []error
	for _, f := range families {
		if m.usable(f) != nil {
			continue
		}
		errs = append(errs, m.gcFamily(f, network, keep))
	}
	return errors.Join(errs...)
}

// gcFamily is GC for one family. When the nat table of f cannot be used
// here, the error wraps ErrUnavailable.
func (m *iptablesMasq) gcFamily(f family, network string, keep []Owner) error {
	// Chains with a kept owner stay; in them, the interfaces not kept go.
	keepIfs := map[string]map[string]bool{}
	chainOwner := map[string]Owner{}
	for _, o := range keep {
		if o.Network != network {
			continue
		}
		chain := iptablesChain(o)
		if keepIfs[chain] == nil {
			keepIfs[chain], chainOwner[chain] = map[string]bool{}, o
		}
		keepIfs[chain][o.IfName] = true
	}
	t, err := m.save(f)
	if err != nil {
		if uerr := m.natUsable(f); errors.Is(uerr, ErrUnavailable) {
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
	unlock, err := m.lockChains(slices.Collect(maps.Keys(changes))...)
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
	if len(all) == 0 || m.restore(f, all) == nil {
		return nil
	}
	// One bad chain must not keep the others: retry them one by one.
	var errs []error
	for chain, lines := range changes {
		if err := m.restore(f, lines); err != nil {
			errs = append(errs, fmt.Errorf("gc %s nat chain %s of network %q: %w", f, chain, network, err))
		}
	}
	return errors.Join(errs...)
}

// gcIfUsable is GC for GCMasqAll: a family whose iptables cannot be used
// (binary missing, nat table not loadable) holds no rules. It decides per
// family, so an unusable IPv6 nat table does not hide an IPv4 failure.
func (m *iptablesMasq) gcIfUsable(network string, keep []Owner) error {
	var errs []error
	for _, f := range families {
		if m.usable(f) != nil {
			continue
		}
		if err := m.gcFamily(f, network, keep); err != nil && !errors.Is(err, ErrUnavailable) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// chainSurelyAbsent reports whether the nat chain is known not to exist,
// without a process: the nf_tables variant of iptables keeps its tables in
// nf_tables ("ip nat", "ip6 nat"), which netlink lists in well under a
// millisecond, while iptables-save costs a process. A jump cannot exist
// without its chain, so Teardown can stop there. Any doubt (legacy
// iptables, a failed dump) answers false and Teardown reads with
// iptables-save as usual.
func (m *iptRunner) chainSurelyAbsent(f family, chain string) bool {
	return m.tableChainSurelyAbsent(f, "nat", chain)
}

// tableChainSurelyAbsent is chainSurelyAbsent for a chain of table.
func (m *iptRunner) tableChainSurelyAbsent(f family, table, chain string) bool {
	if !m.isNFTVariant(f) {
		return false
	}
	there, err := nftChainExists(f, table, chain)
	return err == nil && !there
}

// nftChainExists asks nf_tables for one chain of f's table (a GETCHAIN
// without NLM_F_DUMP). That costs the same however many chains the node
// holds, where a listing grows with every pod's masquerade, port-forward
// and firewall chains. No such chain or table (ENOENT) is false.
func nftChainExists(f family, table, chain string) (bool, error) {
	nl, done, err := requestConn()
	if err != nil {
		return false, err
	}
	defer done()
	return nftChainExistsIn(nl, f.nft(), table, chain)
}

// nftTableExistsIn asks nf_tables on nl for one table of family fam (a
// GETTABLE without NLM_F_DUMP); ENOENT is false.
func nftTableExistsIn(nl *netlink.Conn, fam nftables.TableFamily, table string) (bool, error) {
	return nftObjectExists(nl, unix.NFT_MSG_GETTABLE, fam, func(ae *netlink.AttributeEncoder) {
		ae.String(unix.NFTA_TABLE_NAME, table)
	})
}

// nftChainExistsIn is nftChainExists for a table of any nf_tables family,
// asked on nl.
func nftChainExistsIn(nl *netlink.Conn, fam nftables.TableFamily, table, chain string) (bool, error) {
	return nftObjectExists(nl, unix.NFT_MSG_GETCHAIN, fam, func(ae *netlink.AttributeEncoder) {
		ae.String(unix.NFTA_CHAIN_TABLE, table)
		ae.String(unix.NFTA_CHAIN_NAME, chain)
	})
}

// nftObjectExists sends one GET of msgType (no NLM_F_DUMP) with the
// attributes name writes, and reports whether the object is there: ENOENT
// is false.
func nftObjectExists(nl *netlink.Conn, msgType int, fam nftables.TableFamily, name func(*netlink.AttributeEncoder)) (bool, error) {
	ae := netlink.NewAttributeEncoder()
	name(ae)
	attrs, err := ae.Encode()
	if err != nil {
		return false, err
	}
	_, err = nl.Execute(nftGetRequest(msgType, fam, attrs))
	switch {
	case errors.Is(err, unix.ENOENT):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// isNFTVariant reports whether the restore binary for f is iptables-nft:
// Debian's alternatives link iptables-restore to xtables-nft-multi.
func (m *iptRunner) isNFTVariant(f family) bool {
	if m.variant != "" {
		return m.variant == "nft"
	}
	p, err := lookPath(m.tool(f, "restore"))
	return err == nil && filepath.Base(p) == "xtables-nft-multi"
}
