package nftest

import (
	"errors"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

// What the specs of a backend's Setup over a live attachment share (check
// --repair, podman's network reload and a runtime's second ADD run Setup
// over one; its undo must put back what was there).

// ErrInjected is the failure FailIPv6 injects.
var ErrInjected = errors.New("injected")

// FailIPv6 is an iptables backend's failFamily hook that fails the IPv6
// family with ErrInjected, after IPv4 went through.
func FailIPv6(f nftnl.Family) error {
	if f == nftnl.IPv6 {
		return ErrInjected
	}
	return nil
}

// SetupUndo runs a backend's setupUndoable(a) in n, expects it to succeed,
// and returns its undo, to be run in n.
func SetupUndo[A any](n *ns.NetNS, setupUndoable func(A) (func() error, error), a A) func() error {
	GinkgoHelper()
	var undo func() error
	Expect(In(n, func() (err error) { undo, err = setupUndoable(a); return err })).To(Succeed())
	return func() error { return In(n, undo) }
}

var counterRE = regexp.MustCompile(`\[\d+:\d+\]|counter packets \d+ bytes \d+`)

// StableDump is cmds' output in n without comment lines and counters
// (which time and traffic move).
func StableDump(n *ns.NetNS, cmds ...[]string) string {
	GinkgoHelper()
	var b strings.Builder
	for _, cmd := range cmds {
		for _, l := range strings.Split(testutil.NetfilterOutput(n, cmd...), "\n") {
			if !strings.HasPrefix(l, "#") {
				b.WriteString(counterRE.ReplaceAllString(l, "") + "\n")
			}
		}
	}
	return b.String()
}

// IptablesVariants are the table entries (variant, noNFT) of an iptables
// backend's ways: iptables-nft over netlink where it can, iptables-nft
// through iptables-restore and iptables-save alone, iptables-legacy.
func IptablesVariants() []TableEntry {
	return []TableEntry{
		Entry("iptables-nft, netlink ways", "nft", false),
		Entry("iptables-nft, restore only", "nft", true),
		Entry("iptables-legacy", "legacy", false),
	}
}

// IptablesState is what table holds in n, IPv4 then IPv6, as variant's
// save tools print it, without comment lines and counters.
func IptablesState(n *ns.NetNS, variant, table string) string {
	GinkgoHelper()
	return StableDump(n, []string{"iptables-" + variant + "-save", "-t", table}, []string{"ip6tables-" + variant + "-save", "-t", table})
}

// DeleteIPv4Rule deletes from n's IPv4 table, with variant's iptables
// (behind the backend's back: drift), the rule whose iptables-save line
// after "-A " matches rule, which must be there.
func DeleteIPv4Rule(n *ns.NetNS, variant, table, rule string) {
	GinkgoHelper()
	m := regexp.MustCompile(`(?m)^-A (` + rule + `)$`).FindStringSubmatch(testutil.NetfilterOutput(n, "iptables-"+variant+"-save", "-t", table))
	Expect(m).NotTo(BeNil(), "no rule matching %s", rule)
	testutil.NetfilterOutput(n, append([]string{"iptables-" + variant, "-w", "-t", table, "-D"}, ShellFields(m[1])...)...)
}
