package netfilter

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

// On iptables-nft, Check reads the attachment's chain and POSTROUTING
// over netlink (checkNFT) and starts iptables-save only when something is
// missing or unreadable. It must accept exactly what the iptables-save
// path accepts, whoever wrote the rules: iptables-restore (ours,
// upstream's) or setupNFT.
var _ = Describe("iptables-nft masquerade Check over netlink", func() {
	seed := Owner{Network: "net1", ContainerID: "ctr-seed", IfName: "eth0"}
	o := Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}

	counting := func(calls *[]string) *iptablesMasq {
		return &iptablesMasq{iptRunner: &iptRunner{variant: "nft", run: countingRun(calls)}}
	}
	viaSave := &iptablesMasq{iptRunner: &iptRunner{variant: "nft", noNFT: true}}

	// seeded returns a namespace whose nat tables hold another
	// attachment's rules, made by iptables-restore.
	seeded := func() *ns.NetNS {
		GinkgoHelper()
		n := testutil.NewNS()
		Expect(in(n, func() error { return viaSave.Setup(seed, mustCIDRs("10.9.0.5/24", "fd00:9::5/64")) })).To(Succeed())
		return n
	}

	// ownRules lists o's rules in n as iptables-save prints them, each
	// with its table tool: "-A <chain> <spec>".
	ownRules := func(n *ns.NetNS) map[string][]string {
		GinkgoHelper()
		out := map[string][]string{}
		for _, tool := range []string{"iptables-nft", "ip6tables-nft"} {
			for _, l := range strings.Split(testutil.NetfilterOutput(n, tool+"-save", "-t", "nat"), "\n") {
				if strings.HasPrefix(l, "-A ") && strings.Contains(l, `id: \"ctr-a\"`) {
					out[tool] = append(out[tool], l)
				}
			}
		}
		return out
	}

	checkEach := func(n *ns.NetNS, addrs []string) {
		GinkgoHelper()
		deleteEach(n, "nat", ownRules(n), func(m *iptablesMasq) error { return m.Check(o, mustCIDRs(addrs...)) })
	}

	DescribeTable("agrees with iptables-save on rules written by iptables-restore and over netlink",
		func(addrs ...string) {
			viaRestore, viaNetlink := seeded(), seeded()
			Expect(in(viaRestore, func() error { return viaSave.Setup(o, mustCIDRs(addrs...)) })).To(Succeed())
			var calls []string
			Expect(in(viaNetlink, func() error { return counting(&calls).Setup(o, mustCIDRs(addrs...)) })).To(Succeed())
			Expect(calls).To(BeEmpty(), "written over netlink")
			checkEach(viaRestore, addrs)
			checkEach(viaNetlink, addrs)
		},
		Entry("one IPv4 address", "10.1.0.5/24"),
		Entry("a prefix that ends inside a byte", "10.1.0.5/20"),
		Entry("a short prefix", "10.1.0.5/7"),
		Entry("two addresses of one subnet", "10.1.0.5/24", "10.1.0.6/24"),
		Entry("two subnets", "10.1.0.5/24", "10.2.0.5/16"),
		Entry("one IPv6 address", "fd00:1::5/64"),
		Entry("an IPv6 prefix that ends inside a byte", "fd00:1::5/61"),
		Entry("dual stack", "10.1.0.5/24", "fd00:1::5/64"),
	)

	It("agrees with iptables-save on upstream's layout (no markers)", func() {
		n := seeded()
		chain, comment := iptablesChain(o), iptablesComment(o)
		for _, args := range [][]string{
			{"-N", chain},
			{"-A", chain, "-d", "10.1.0.5/24", "-j", "ACCEPT", "-m", "comment", "--comment", comment},
			{"-A", chain, "!", "-d", "224.0.0.0/4", "-j", "MASQUERADE", "-m", "comment", "--comment", comment},
			{"-A", "POSTROUTING", "-s", "10.1.0.5", "-j", chain, "-m", "comment", "--comment", comment},
		} {
			testutil.NetfilterOutput(n, append([]string{"iptables-nft", "-w", "-t", "nat"}, args...)...)
		}
		checkEach(n, []string{"10.1.0.5/24"})
	})

	It("asks iptables-save about a chain rule it cannot read, and answers as it does", func() {
		n := seeded()
		Expect(in(n, func() error { return counting(new([]string)).Setup(o, mustCIDRs("10.1.0.5/24")) })).To(Succeed())
		// A MASQUERADE with options: not what Check wants, but iptables-save
		// alone can say what it is.
		testutil.NetfilterOutput(n, "iptables-nft", "-t", "nat", "-I", iptablesChain(o), "1", "-p", "tcp", "-j", "MASQUERADE", "--to-ports", "1000")
		var calls []string
		Expect(in(n, func() error { return counting(&calls).Check(o, mustCIDRs("10.1.0.5/24")) })).To(Succeed())
		Expect(calls).To(Equal([]string{"iptables-nft-save"}))

		// A MASQUERADE with an option iptables-save prints, instead of
		// the one Check wants: that one is missing.
		testutil.NetfilterOutput(n, "iptables-nft", "-t", "nat", "-D", iptablesChain(o), "1")
		masq := masqSpec(ipv4, saveQuote(iptablesComment(o)))
		testutil.NetfilterOutput(n, append([]string{"iptables-nft", "-t", "nat", "-D", iptablesChain(o)}, shellFields(masq)...)...)
		testutil.NetfilterOutput(n, append([]string{"iptables-nft", "-t", "nat", "-A", iptablesChain(o)}, shellFields(masq+" --random")...)...)
		err := in(n, func() error { return counting(&calls).Check(o, mustCIDRs("10.1.0.5/24")) })
		Expect(err).To(MatchError(ErrMissing))
		Expect(err.Error()).To(HaveSuffix(masq))
	})

	It("leaves a nat table that iptables-nft did not make to iptables-save", func() {
		n := testutil.NewNS()
		testutil.NetfilterOutput(n, "nft", "add table ip nat; add chain ip nat POSTROUTING { type nat hook postrouting priority 50; }")
		// Every rule Check wants, as iptables-nft encodes it, but in a
		// table nft made: only iptables-save may judge it.
		want := desiredIPTables(o, ipv4, mustCIDRs("10.1.0.5/24"))
		rules, ok := want.nftRules(ipv4)
		Expect(ok).To(BeTrue())
		Expect(in(n, func() error {
			return withNFT(func(c *nftConn) error {
				table := &nftables.Table{Name: "nat", Family: nftables.TableFamilyIPv4}
				chain := c.AddChain(&nftables.Chain{Name: want.chain, Table: table})
				for _, r := range rules.own {
					c.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: r})
				}
				for _, r := range rules.jumps {
					c.AddRule(&nftables.Rule{Table: table, Chain: &nftables.Chain{Name: "POSTROUTING", Table: table}, Exprs: r})
				}
				return c.Flush()
			})
		})).To(Succeed())
		var calls []string
		_ = in(n, func() error { return counting(&calls).Check(o, mustCIDRs("10.1.0.5/24")) })
		Expect(calls).To(Equal([]string{"iptables-nft-save"}))
	})
})

// deleteEach deletes each of rules (per tool, lines as tool-save prints
// them for table) from n in turn, expects check to answer as it does
// through iptables-save (mostly: fail, naming the rule), and puts the rule
// back where it was. With every rule in place, check passes with no
// process.
func deleteEach(n *ns.NetNS, table string, rules map[string][]string, check func(m *iptablesMasq) error) {
	GinkgoHelper()
	var calls []string
	counting := &iptablesMasq{iptRunner: &iptRunner{variant: "nft", run: countingRun(&calls)}}
	viaSave := &iptablesMasq{iptRunner: &iptRunner{variant: "nft", noNFT: true}}
	Expect(in(n, func() error { return check(counting) })).To(Succeed())
	Expect(calls).To(BeEmpty(), "no iptables-save")
	Expect(rules).NotTo(BeEmpty())
	failed := 0
	for tool, ls := range rules {
		for _, l := range ls {
			chain, spec, _ := strings.Cut(strings.TrimPrefix(l, "-A "), " ")
			pos := chainPosition(n, tool, table, l)
			testutil.NetfilterOutput(n, append([]string{tool, "-t", table, "-D", chain}, shellFields(spec)...)...)
			err := in(n, func() error { return check(counting) })
			want := in(n, func() error { return check(viaSave) })
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
			testutil.NetfilterOutput(n, append([]string{tool, "-t", table, "-I", chain, strconv.Itoa(pos)}, shellFields(spec)...)...)
			calls = nil
			Expect(in(n, func() error { return check(counting) })).To(Succeed(), l)
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

func TestIPTSaveString(t *testing.T) {
	for in, want := range map[string]string{
		"CNI-abc_1":         `CNI-abc_1`,
		"":                  `""`,
		`name: "n" id: "c"`: `"name: \"n\" id: \"c\""`,
		`a\b`:               `"a\\b"`,
		"it's":              `"it\'s"`,
		"\xff":              "\"\xff\"",
	} {
		if got := iptSaveString(in); got != want {
			t.Errorf("iptSaveString(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestIPTSaveSpecRefusesOtherEncodings(t *testing.T) {
	o := Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
	want := desiredIPTables(o, ipv4, []*net.IPNet{cidr(t, "10.1.0.5/24")})
	rules, ok := want.nftRules(ipv4)
	if !ok {
		t.Fatal("nftRules")
	}
	specs := append(want.rules(), want.jumps...)
	all := append(append([][]expr.Any{}, rules.own...), rules.jumps...)
	for i, exprs := range all {
		got, ok := iptSaveSpec(ipv4, exprs)
		if !ok || got != specs[i] {
			t.Errorf("rule %d: iptSaveSpec = %q, %v; want %q", i, got, ok, specs[i])
		}
	}
	// The /24 accept with a mask iptables does not write: same meaning,
	// another encoding, so not trusted.
	accept := rules.own[len(want.markers)]
	masked := append(matchAddr(ipv4, false, expr.CmpOpEq, cidr(t, "10.1.0.0/24")), accept[2:]...)
	if got, ok := iptSaveSpec(ipv4, masked); ok {
		t.Errorf("masked /24 rendered as %q", got)
	}
	// Without its counter, iptables-nft would not have written it.
	noCounter := append(append([]expr.Any{}, accept[:3]...), accept[4:]...)
	if got, ok := iptSaveSpec(ipv4, noCounter); ok {
		t.Errorf("rule without counter rendered as %q", got)
	}
}
