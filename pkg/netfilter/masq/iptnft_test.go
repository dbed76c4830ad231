package masq

import (
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
	"github.com/cniforge/plugins/pkg/netfilter/iptnft"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

// On iptables-nft, a Setup that finds the nat table as iptables-nft makes
// it writes its fresh chain over netlink (setupNFT). Whatever reads the
// rules (iptables-save, iptables -C and -D, nft) must not be able to tell
// them from iptables-restore's.
var _ = Describe("iptables-nft masquerade written over netlink", func() {
	seed := netfilter.Owner{Network: "net1", ContainerID: "ctr-seed", IfName: "eth0"}
	o := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
	nft := iptablesCase("nft")

	listings := func(n *ns.NetNS) string { GinkgoHelper(); return nftest.NftListings(n, "-t", "nat") }

	DescribeTable("writes exactly what iptables-restore writes, with no process",
		func(addrs ...string) {
			viaRestore, viaNetlink := seededNAT(seed), seededNAT(seed)
			Expect(nftest.In(viaRestore, func() error {
				return (&iptablesMasq{Runner: nftest.ViaRestore()}).Setup(o, mustCIDRs(addrs...))
			})).To(Succeed())
			var calls []string
			Expect(nftest.In(viaNetlink, func() error { return countingMasq(&calls).Setup(o, mustCIDRs(addrs...)) })).To(Succeed())
			Expect(calls).To(BeEmpty(), "no iptables process")
			Expect(listings(viaNetlink)).To(Equal(listings(viaRestore)))
			Expect(nft.kernel(viaNetlink)).To(ContainSubstring(netfilter.IptablesChain(o)))

			// iptables finds every rule by its spec, as upstream's DEL
			// deletes the POSTROUTING jumps.
			nftest.CheckEachBySpec(viaNetlink, "nat", func(l string) bool { return strings.Contains(l, `id: \"ctr-a\"`) })
			Expect(nftest.In(viaNetlink, func() error { return countingMasq(&calls).Check(o, mustCIDRs(addrs...)) })).To(Succeed())
			calls = nil
			Expect(nftest.In(viaNetlink, func() error { return countingMasq(&calls).Teardown(o) })).To(Succeed())
			Expect(nftest.In(viaRestore, func() error { return countingMasq(&calls).Teardown(o) })).To(Succeed())
			Expect(nft.kernel(viaNetlink)).NotTo(ContainSubstring(netfilter.IptablesChain(o)))
			Expect(nft.kernel(viaNetlink)).To(Equal(nft.kernel(viaRestore)))
			Expect(calls).To(BeEmpty(), "Teardown deletes over netlink too")
		},
		addrCases,
	)

	It("masquerades traffic with the rules it wrote", func() {
		hostNS := seededNAT(seed)
		contNS, outNS := testutil.NewNS(), testutil.NewNS()
		Expect(wireRouter(hostNS, contNS, outNS)).To(Succeed())
		var calls []string
		Expect(nftest.In(hostNS, func() error {
			return countingMasq(&calls).Setup(o, mustCIDRs("10.1.0.5/24", "fd00:1::5/64"))
		})).To(Succeed())
		Expect(calls).To(BeEmpty())
		Expect(testutil.UDPSource(contNS, outNS, "10.99.0.2")).To(Equal("10.99.0.1"))
		Expect(testutil.UDPSource(contNS, outNS, "fd00:99::2")).To(Equal("fd00:99::1"))
	})

	It("leaves a nat table that iptables-nft did not make to iptables-restore", func() {
		n := testutil.NewNS()
		testutil.NetfilterOutput(n, "nft", "add table ip nat; add chain ip nat POSTROUTING { type nat hook postrouting priority 50; }")
		var calls []string
		_ = nftest.In(n, func() error { return countingMasq(&calls).Setup(o, mustCIDRs("10.1.0.5/24")) })
		Expect(calls).To(ContainElement("iptables-nft-restore"))
		m := &iptablesMasq{Runner: &iptables.Runner{Variant: "nft"}}
		Expect(nftest.In(n, func() error { m.Prestart(); return nil })).To(Succeed())
		Expect(m.Prestarted).NotTo(BeNil(), "a restore is prestarted for such a table")
		m.Release()
	})

	It("leaves a repeated Setup, whose chain exists, to iptables-restore", func() {
		n := seededNAT(seed)
		var calls []string
		Expect(nftest.In(n, func() error { return countingMasq(&calls).Setup(o, mustCIDRs("10.1.0.5/24")) })).To(Succeed())
		Expect(calls).To(BeEmpty())
		before := nft.kernel(n)
		Expect(before).To(ContainSubstring(netfilter.IptablesChain(o)))
		Expect(nftest.In(n, func() error { return countingMasq(&calls).Setup(o, mustCIDRs("10.1.0.5/24")) })).To(Succeed())
		Expect(calls).To(Equal([]string{"iptables-nft-restore", "iptables-nft-save"}), "the fresh restore fails, the read finds nothing to change")
		Expect(nft.kernel(n)).To(Equal(before))
	})

	It("undoes the IPv4 rules it wrote when the IPv6 ones fail", func() {
		n := testutil.NewNS()
		Expect(nftest.In(n, func() error {
			return (&iptablesMasq{Runner: &iptables.Runner{Variant: "nft"}}).Setup(seed, mustCIDRs("10.9.0.5/24"))
		})).To(Succeed())
		before := nft.kernel(n)
		m := &iptablesMasq{Runner: &iptables.Runner{Variant: "nft", Run: func(name string, args []string, stdin []byte) ([]byte, error) {
			if strings.HasPrefix(name, "ip6tables") {
				return nil, errors.New("injected failure")
			}
			return iptables.RunCommand(name, args, stdin)
		}}}
		err := nftest.In(n, func() error { return m.Setup(o, mustCIDRs("10.1.0.5/24", "fd00:1::5/64")) })
		Expect(err).To(MatchError(ContainSubstring("injected failure")))
		Expect(nft.kernel(n)).To(Equal(before))
	})

	It("prestarts no restore where it will write over netlink", func() {
		m := &iptablesMasq{Runner: &iptables.Runner{Variant: "nft"}}
		Expect(nftest.In(seededNAT(seed), func() error { m.Prestart(); return nil })).To(Succeed())
		Expect(m.Prestarted).To(BeNil())
	})
})

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
		return nftest.SavedRules(n, "nat", func(l string) bool { return strings.Contains(l, `id: \"ctr-a\"`) })
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

// The netlink teardown of iptables-nft rules must leave the nat table
// exactly as the iptables-save + iptables-restore path does, and take
// that path whenever the chain does not go as a whole.
var _ = Describe("iptables-nft teardown over netlink", func() {
	eth0 := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
	eth1 := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth1"}
	other := netfilter.Owner{Network: "net1", ContainerID: "ctr-b", IfName: "eth0"}

	restoreText := func(n *ns.NetNS, tool, text string) {
		GinkgoHelper()
		Expect(nftest.In(n, func() error {
			cmd := exec.Command(tool, "--noflush")
			cmd.Stdin = strings.NewReader(text)
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
			return nil
		})).To(Succeed())
	}
	// upstream writes what upstream's bridge ADD leaves for o (no
	// markers), as iptables-save prints it.
	upstream := func(n *ns.NetNS, o netfilter.Owner, ip, subnet string) {
		GinkgoHelper()
		chain, c := netfilter.IptablesChain(o), iptables.SaveQuote(netfilter.IptablesComment(o))
		restoreText(n, "iptables-nft-restore", fmt.Sprintf("*nat\n:%[1]s - [0:0]\n"+
			"-A POSTROUTING -s %[3]s/32 -m comment --comment %[2]s -j %[1]s\n"+
			"-A %[1]s -d %[4]s -m comment --comment %[2]s -j ACCEPT\n"+
			"-A %[1]s ! -d 224.0.0.0/4 -m comment --comment %[2]s -j MASQUERADE\nCOMMIT\n", chain, c, ip, subnet))
	}
	setup := func(n *ns.NetNS, o netfilter.Owner, cidrs ...string) {
		GinkgoHelper()
		m := &iptablesMasq{Runner: &iptables.Runner{Variant: "nft"}}
		Expect(nftest.In(n, func() error { return m.Setup(o, mustCIDRs(cidrs...)) })).To(Succeed())
	}

	// teardown runs Teardown(o) on the node prepare makes, once with the
	// netlink path and once without it, each on a namespace of its own,
	// and returns the processes the netlink run started. The two nat
	// tables must end up the same.
	teardown := func(o netfilter.Owner, prepare func(n *ns.NetNS)) []string {
		GinkgoHelper()
		fast, slow := testutil.NewNS(), testutil.NewNS()
		prepare(fast)
		prepare(slow)
		before := iptablesCase("nft").kernel(fast)
		Expect(before).To(ContainSubstring(netfilter.IptablesChain(o)), "the node holds o's chain before the teardown")
		var calls []string
		m := &iptablesMasq{Runner: nftest.Counting(&calls)}
		Expect(nftest.In(fast, func() error { return m.Teardown(o) })).To(Succeed())
		Expect(nftest.In(slow, func() error {
			return (&iptablesMasq{Runner: nftest.ViaRestore()}).Teardown(o)
		})).To(Succeed())
		Expect(iptablesCase("nft").kernel(fast)).To(Equal(iptablesCase("nft").kernel(slow)))
		return calls
	}

	It("deletes an attachment's chain and jumps, IPv4 and IPv6, with no process", func() {
		calls := teardown(eth0, func(n *ns.NetNS) {
			setup(n, eth0, "10.1.0.5/24", "fd00:1::5/64")
			setup(n, other, "10.1.0.6/24", "fd00:1::6/64")
		})
		Expect(calls).To(BeEmpty())
	})

	It("deletes the chain upstream's ADD made (no markers), with no process", func() {
		var nat string
		calls := teardown(eth0, func(n *ns.NetNS) {
			upstream(n, eth0, "10.1.0.5", "10.1.0.0/24")
			upstream(n, other, "10.1.0.6", "10.1.0.0/24")
			nat = iptablesCase("nft").kernel(n)
		})
		Expect(calls).To(BeEmpty())
		Expect(nat).To(ContainSubstring(netfilter.IptablesChain(other)))
	})

	It("leaves a chain another interface of the container still uses to iptables-save", func() {
		calls := teardown(eth0, func(n *ns.NetNS) {
			setup(n, eth0, "10.1.0.5/24")
			setup(n, eth1, "10.2.0.5/24")
		})
		Expect(calls).To(Equal([]string{"iptables-nft-save", "iptables-nft-restore"}))
	})

	It("leaves a chain with a jump no marker accounts for to iptables-save", func() {
		calls := teardown(eth0, func(n *ns.NetNS) {
			setup(n, eth0, "10.1.0.5/24")
			restoreText(n, "iptables-nft-restore", fmt.Sprintf("*nat\n-A POSTROUTING -s 10.9.0.9/32 -m comment --comment %s -j %s\nCOMMIT\n",
				iptables.SaveQuote(netfilter.IptablesComment(eth0)), netfilter.IptablesChain(eth0)))
		})
		Expect(calls).To(Equal([]string{"iptables-nft-save", "iptables-nft-restore"}))
	})
})
