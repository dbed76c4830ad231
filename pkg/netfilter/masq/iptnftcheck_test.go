package masq

import (
	"net"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
	"github.com/cniforge/plugins/pkg/netfilter/iptnft"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// On iptables-nft, Check reads the attachment's chain and POSTROUTING
// over netlink (checkNFT) and starts iptables-save only when something is
// missing or unreadable. It must accept exactly what the iptables-save
// path accepts, whoever wrote the rules: iptables-restore (ours,
// upstream's) or setupNFT.
var _ = Describe("iptables-nft masquerade Check over netlink", func() {
	seed := netfilter.Owner{Network: "net1", ContainerID: "ctr-seed", IfName: "eth0"}
	o := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}

	viaSave := &iptablesMasq{Runner: nftest.ViaRestore()}

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
		nftest.DeleteEach(n, "nat", ownRules(n), func(r *iptables.Runner) error { return (&iptablesMasq{Runner: r}).Check(o, mustCIDRs(addrs...)) })
	}

	DescribeTable("agrees with iptables-save on rules written by iptables-restore and over netlink",
		func(addrs ...string) {
			viaRestore, viaNetlink := seededNAT(seed), seededNAT(seed)
			Expect(nftest.In(viaRestore, func() error { return viaSave.Setup(o, mustCIDRs(addrs...)) })).To(Succeed())
			var calls []string
			Expect(nftest.In(viaNetlink, func() error { return countingMasq(&calls).Setup(o, mustCIDRs(addrs...)) })).To(Succeed())
			Expect(calls).To(BeEmpty(), "written over netlink")
			checkEach(viaRestore, addrs)
			checkEach(viaNetlink, addrs)
		},
		addrCases,
	)

	It("agrees with iptables-save on upstream's layout (no markers)", func() {
		n := seededNAT(seed)
		chain, comment := netfilter.IptablesChain(o), netfilter.IptablesComment(o)
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
		n := seededNAT(seed)
		Expect(nftest.In(n, func() error { return countingMasq(new([]string)).Setup(o, mustCIDRs("10.1.0.5/24")) })).To(Succeed())
		// A MASQUERADE with options: not what Check wants, but iptables-save
		// alone can say what it is.
		testutil.NetfilterOutput(n, "iptables-nft", "-t", "nat", "-I", netfilter.IptablesChain(o), "1", "-p", "tcp", "-j", "MASQUERADE", "--to-ports", "1000")
		var calls []string
		Expect(nftest.In(n, func() error { return countingMasq(&calls).Check(o, mustCIDRs("10.1.0.5/24")) })).To(Succeed())
		Expect(calls).To(Equal([]string{"iptables-nft-save"}))

		// A MASQUERADE with an option iptables-save prints, instead of
		// the one Check wants: that one is missing.
		testutil.NetfilterOutput(n, "iptables-nft", "-t", "nat", "-D", netfilter.IptablesChain(o), "1")
		masq := masqSpec(nftnl.IPv4, iptables.SaveQuote(netfilter.IptablesComment(o)))
		testutil.NetfilterOutput(n, append([]string{"iptables-nft", "-t", "nat", "-D", netfilter.IptablesChain(o)}, nftest.ShellFields(masq)...)...)
		testutil.NetfilterOutput(n, append([]string{"iptables-nft", "-t", "nat", "-A", netfilter.IptablesChain(o)}, nftest.ShellFields(masq+" --random")...)...)
		err := nftest.In(n, func() error { return countingMasq(&calls).Check(o, mustCIDRs("10.1.0.5/24")) })
		Expect(err).To(MatchError(netfilter.ErrMissing))
		Expect(err.Error()).To(HaveSuffix(masq))
	})

	It("leaves a nat table that iptables-nft did not make to iptables-save", func() {
		n := testutil.NewNS()
		testutil.NetfilterOutput(n, "nft", "add table ip nat; add chain ip nat POSTROUTING { type nat hook postrouting priority 50; }")
		// Every rule Check wants, as iptables-nft encodes it, but in a
		// table nft made: only iptables-save may judge it.
		want := desiredIPTables(o, nftnl.IPv4, mustCIDRs("10.1.0.5/24"))
		rules, ok := want.nftRules(nftnl.IPv4)
		Expect(ok).To(BeTrue())
		Expect(nftest.In(n, func() error {
			return nftnl.WithNFT(func(c *nftnl.NftConn) error {
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
		_ = nftest.In(n, func() error { return countingMasq(&calls).Check(o, mustCIDRs("10.1.0.5/24")) })
		Expect(calls).To(Equal([]string{"iptables-nft-save"}))
	})
})

func TestIPTSaveString(t *testing.T) {
	for in, want := range map[string]string{
		"CNI-abc_1":         `CNI-abc_1`,
		"":                  `""`,
		`name: "n" id: "c"`: `"name: \"n\" id: \"c\""`,
		`a\b`:               `"a\\b"`,
		"it's":              `"it\'s"`,
		"\xff":              "\"\xff\"",
	} {
		if got := iptnft.IptSaveString(in); got != want {
			t.Errorf("iptSaveString(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestIPTSaveSpecRefusesOtherEncodings(t *testing.T) {
	o := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
	want := desiredIPTables(o, nftnl.IPv4, []*net.IPNet{cidr(t, "10.1.0.5/24")})
	rules, ok := want.nftRules(nftnl.IPv4)
	if !ok {
		t.Fatal("nftRules")
	}
	specs := append(want.rules(), want.jumps...)
	all := append(append([][]expr.Any{}, rules.own...), rules.jumps...)
	for i, exprs := range all {
		got, ok := iptnft.IptSaveSpec(nftnl.IPv4, exprs)
		if !ok || got != specs[i] {
			t.Errorf("rule %d: iptSaveSpec = %q, %v; want %q", i, got, ok, specs[i])
		}
	}
	// The /24 accept with a mask iptables does not write: same meaning,
	// another encoding, so not trusted.
	accept := rules.own[len(want.markers)]
	masked := append(nftnl.MatchAddr(nftnl.IPv4, false, expr.CmpOpEq, cidr(t, "10.1.0.0/24")), accept[2:]...)
	if got, ok := iptnft.IptSaveSpec(nftnl.IPv4, masked); ok {
		t.Errorf("masked /24 rendered as %q", got)
	}
	// Without its counter, iptables-nft would not have written it.
	noCounter := append(append([]expr.Any{}, accept[:3]...), accept[4:]...)
	if got, ok := iptnft.IptSaveSpec(nftnl.IPv4, noCounter); ok {
		t.Errorf("rule without counter rendered as %q", got)
	}
}
