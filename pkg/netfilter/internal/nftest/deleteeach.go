package nftest

import (
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"

	"github.com/cniforge/plugins/pkg/netfilter/iptables"
)

// deleteEach deletes each of rules (per tool, lines as tool-save prints
// them for table) from n in turn, expects check to answer as it does
// through iptables-save (mostly: fail, naming the rule), and puts the rule
// back where it was. With every rule in place, check passes with no
// process.
func DeleteEach(n *ns.NetNS, table string, rules map[string][]string, check func(r *iptables.Runner) error) {
	GinkgoHelper()
	var calls []string
	counting := &iptables.Runner{Variant: "nft", Run: CountingRun(&calls)}
	viaSave := &iptables.Runner{Variant: "nft", NoNFT: true}
	Expect(In(n, func() error { return check(counting) })).To(Succeed())
	Expect(calls).To(BeEmpty(), "no iptables-save")
	Expect(rules).NotTo(BeEmpty())
	failed := 0
	for tool, ls := range rules {
		for _, l := range ls {
			chain, spec, _ := strings.Cut(strings.TrimPrefix(l, "-A "), " ")
			pos := chainPosition(n, tool, table, l)
			testutil.NetfilterOutput(n, append([]string{tool, "-t", table, "-D", chain}, ShellFields(spec)...)...)
			err := In(n, func() error { return check(counting) })
			want := In(n, func() error { return check(viaSave) })
			if want == nil {
				// E.g. the chain's only marker: without it the chain has
				// upstream's layout, which has none.
				Expect(err).NotTo(HaveOccurred(), l)
			} else {
				failed++
				Expect(err).To(MatchError(want.Error()), l)
				// Named by its matches (an upstream rule by the form
				// of ours that would also do).
				// portmap names a missing hostport entry by its chain,
				// protocol, port and target: any entry listing the port
				// will do.
				matches, target, _ := strings.Cut(spec, " -j ")
				Expect(err.Error()).To(Or(ContainSubstring(matches), And(ContainSubstring(chain), ContainSubstring("-j "+target))),
					"names the missing rule")
			}
			// Back in its place: Check also judges the order.
			testutil.NetfilterOutput(n, append([]string{tool, "-t", table, "-I", chain, strconv.Itoa(pos)}, ShellFields(spec)...)...)
			calls = nil
			Expect(In(n, func() error { return check(counting) })).To(Succeed(), l)
			Expect(calls).To(BeEmpty(), "no iptables-save")
		}
	}
	Expect(failed).To(BeNumerically(">", 0))
}

// chainPosition is the 1-based place of line among its chain's rules in
// the table tool-save prints.
func chainPosition(n *ns.NetNS, tool, table, line string) int {
	GinkgoHelper()
	chain, _, _ := strings.Cut(strings.TrimPrefix(line, "-A "), " ")
	pos := 0
	for _, l := range strings.Split(testutil.NetfilterOutput(n, tool+"-save", "-t", table), "\n") {
		if strings.HasPrefix(l, "-A "+chain+" ") {
			pos++
			if l == line {
				return pos
			}
		}
	}
	Fail("no " + line)
	return 0
}
