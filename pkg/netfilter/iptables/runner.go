package iptables

import (
	"fmt"
	"path/filepath"
	"sync"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// iptRunner runs the iptables tools of one variant: iptables-restore
// batches and iptables-save reads, with the chain locks, the prestarted
// restore, and the probes of what the kernel holds. The masquerade, port
// forwarding and firewall backends share it.
type Runner struct {
	// variant picks the binaries: "" for whatever iptables-restore is on
	// PATH (Debian's alternatives), "legacy" or "nft" for
	// iptables-legacy-restore / iptables-nft-restore. Tests set it to run
	// both.
	Variant string
	// run executes one command with stdin and returns its stdout; nil means
	// runCommand. Tests count processes through it.
	Run func(name string, args []string, stdin []byte) ([]byte, error)
	// lockDir holds the chain locks; "" means iptablesLockDir. Tests
	// point it at a directory of their own to count its files.
	LockDir string
	// natProbe replaces natUsable's look at the nat table when set: tests
	// inject the error iptables gives when the check fails.
	NatProbe func(f nftnl.Family) error
	// noNFT turns the netlink short ways off (setupNFT, the teardownNFTs,
	// portmap setup's sharedViewNFT), so tests can compare them with the
	// iptables-restore and iptables-save paths.
	NoNFT bool

	mu         sync.Mutex
	Prestarted *prestartedRestore // see Prestart
}

// tool returns the binary name of tool ("restore" or "save") for f.
func (m *Runner) Tool(f nftnl.Family, tool string) string {
	base := "iptables"
	if f == nftnl.IPv6 {
		base = "ip6tables"
	}
	if m.Variant != "" {
		return base + "-" + m.Variant + "-" + tool
	}
	return base + "-" + tool
}

// usable reports whether both binaries for f exist; their absence means no
// rules of that family can exist either.
func (m *Runner) Usable(f nftnl.Family) error {
	for _, t := range []string{"restore", "save"} {
		if _, err := findTool(m.Tool(f, t)); err != nil {
			return fmt.Errorf("%s: %w: %w", m.Tool(f, t), netfilter.ErrUnavailable, err)
		}
	}
	return nil
}

// restore applies lines to the nat table of f as one transaction: either
// every line takes effect or none does. -w waits for the xtables lock that
// legacy iptables takes, instead of failing when another plugin holds it.
func (m *Runner) Restore(f nftnl.Family, lines []string) error {
	_, err := m.Exec(m.Tool(f, "restore"), RestoreArgs, RestorePayload(lines))
	return err
}

// save reads the nat table of f.
func (m *Runner) Save(f nftnl.Family) (NatTable, error) {
	out, err := m.Exec(m.Tool(f, "save"), []string{"-t", "nat"}, nil)
	if err != nil {
		return NatTable{}, err
	}
	return ParseNATSave(out)
}

// chainSurelyAbsent reports whether the nat chain is known not to exist,
// without a process: the nf_tables variant of iptables keeps its tables in
// nf_tables ("ip nat", "ip6 nat"), which netlink lists in well under a
// millisecond, while iptables-save costs a process. A jump cannot exist
// without its chain, so Teardown can stop there. Any doubt (legacy
// iptables, a failed dump) answers false and Teardown reads with
// iptables-save as usual.
func (m *Runner) ChainSurelyAbsent(f nftnl.Family, chain string) bool {
	return m.TableChainSurelyAbsent(f, "nat", chain)
}

// tableChainSurelyAbsent is chainSurelyAbsent for a chain of table.
func (m *Runner) TableChainSurelyAbsent(f nftnl.Family, table, chain string) bool {
	if !m.IsNFTVariant(f) {
		return false
	}
	there, err := nftnl.NftChainExists(f, table, chain)
	return err == nil && !there
}

// isNFTVariant reports whether the restore binary for f is iptables-nft:
// Debian's alternatives link iptables-restore to xtables-nft-multi.
func (m *Runner) IsNFTVariant(f nftnl.Family) bool {
	if m.Variant != "" {
		return m.Variant == "nft"
	}
	p, err := lookPath(m.Tool(f, "restore"))
	return err == nil && filepath.Base(p) == "xtables-nft-multi"
}
