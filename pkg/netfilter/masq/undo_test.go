package masq

import (
	"errors"
	"net"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

var counterRE = regexp.MustCompile(`\[\d+:\d+\]`)

// check --repair runs Setup over a live attachment (pkg/node's repairMasq):
// when a later family fails, the masquerade rules that were there stay
// (they carry a running pod's traffic); only what this Setup added goes.
var _ = DescribeTableSubtree("iptables Setup over a live attachment", func(variant string, noNFT bool) {
	var n *ns.NetNS
	var m *iptablesMasq
	o := netfilter.Owner{Network: "mq", ContainerID: "live", IfName: "eth0"}
	addrs := []*net.IPNet{{IP: net.ParseIP("10.1.0.5"), Mask: net.CIDRMask(24, 32)}, {IP: net.ParseIP("fd00:1::5"), Mask: net.CIDRMask(64, 128)}}
	chain := netfilter.IptablesChain(o)
	state := func() string {
		GinkgoHelper()
		var b strings.Builder
		for _, tool := range []string{"iptables-" + variant + "-save", "ip6tables-" + variant + "-save"} {
			for _, l := range strings.Split(testutil.NetfilterOutput(n, tool, "-t", "nat"), "\n") {
				if !strings.HasPrefix(l, "#") {
					b.WriteString(counterRE.ReplaceAllString(l, "") + "\n")
				}
			}
		}
		return b.String()
	}
	failIPv6 := func(f nftnl.Family) error {
		if f == nftnl.IPv6 {
			return errors.New("injected")
		}
		return nil
	}
	BeforeEach(func() {
		n = testutil.NewNS()
		m = &iptablesMasq{Runner: &iptables.Runner{Variant: variant, NoNFT: noNFT}}
	})
	setup := func() error { return nftest.In(n, func() error { return m.Setup(o, addrs) }) }

	It("keeps the live rules when a later family fails", func() {
		Expect(setup()).To(Succeed())
		live := state()
		Expect(live).To(ContainSubstring(chain))
		m.failFamily = failIPv6
		Expect(setup()).To(MatchError("injected"))
		Expect(state()).To(Equal(live), "IPv4, done before IPv6 failed, is as it was")
		m.failFamily = nil
		Expect(nftest.In(n, func() error { return m.Check(o, addrs) })).To(Succeed())
	})

	It("after drift, a failed repair leaves what drift left", func() {
		Expect(setup()).To(Succeed())
		re := regexp.MustCompile(`(?m)^-A (` + chain + ` -d 10\.1\.0\.0/24 .*-j ACCEPT)$`)
		rule := re.FindStringSubmatch(testutil.NetfilterOutput(n, "iptables-"+variant+"-save", "-t", "nat"))
		Expect(rule).NotTo(BeNil())
		testutil.NetfilterOutput(n, append([]string{"iptables-" + variant, "-w", "-t", "nat", "-D"}, nftest.ShellFields(rule[1])...)...)
		drifted := state()
		Expect(nftest.In(n, func() error { return m.Check(o, addrs) })).NotTo(Succeed())
		m.failFamily = failIPv6
		Expect(setup()).To(MatchError("injected"))
		Expect(state()).To(Equal(drifted))
	})

	It("leaves nothing of a fresh attachment", func() {
		m.failFamily = failIPv6
		Expect(setup()).To(MatchError("injected"))
		Expect(state()).NotTo(ContainSubstring(chain))
		m.failFamily = nil
		var undo func() error
		Expect(nftest.In(n, func() (err error) { undo, err = m.SetupUndoable(o, addrs); return err })).To(Succeed())
		Expect(state()).To(ContainSubstring(chain))
		Expect(nftest.In(n, undo)).To(Succeed())
		Expect(state()).NotTo(ContainSubstring(chain), "nor does the undo of a fresh one")
	})

	It("undoes a repair over drift back to what drift left, and changes nothing over a live attachment", func() {
		Expect(setup()).To(Succeed())
		live := state()
		var undo func() error
		Expect(nftest.In(n, func() (err error) { undo, err = m.SetupUndoable(o, addrs); return err })).To(Succeed())
		Expect(nftest.In(n, undo)).To(Succeed())
		Expect(state()).To(Equal(live))

		re := regexp.MustCompile(`(?m)^-A (` + chain + ` -d 10\.1\.0\.0/24 .*-j ACCEPT)$`)
		rule := re.FindStringSubmatch(testutil.NetfilterOutput(n, "iptables-"+variant+"-save", "-t", "nat"))
		Expect(rule).NotTo(BeNil())
		testutil.NetfilterOutput(n, append([]string{"iptables-" + variant, "-w", "-t", "nat", "-D"}, nftest.ShellFields(rule[1])...)...)
		drifted := state()
		Expect(nftest.In(n, func() (err error) { undo, err = m.SetupUndoable(o, addrs); return err })).To(Succeed())
		Expect(nftest.In(n, func() error { return m.Check(o, addrs) })).To(Succeed(), "the repair put the rule back")
		Expect(nftest.In(n, undo)).To(Succeed())
		Expect(state()).To(Equal(drifted))
	})
},
	Entry("iptables-nft, netlink ways", "nft", false),
	Entry("iptables-nft, restore only", "nft", true),
	Entry("iptables-legacy", "legacy", false),
)

var _ = Describe("nftables SetupUndoable over a live attachment", func() {
	It("changes nothing over a live attachment, takes back only what a repair added, leaves nothing of a fresh one", func() {
		n := testutil.NewNS()
		m := newNFTablesMasq()
		o := netfilter.Owner{Network: "mq", ContainerID: "live", IfName: "eth0"}
		addrs := []*net.IPNet{{IP: net.ParseIP("10.1.0.5"), Mask: net.CIDRMask(24, 32)}, {IP: net.ParseIP("fd00:1::5"), Mask: net.CIDRMask(64, 128)}}
		state := func() string {
			GinkgoHelper()
			return counterRE.ReplaceAllString(testutil.NetfilterOutput(n, "nft", "-a", "list", "ruleset"), "")
		}
		setupUndo := func() func() error {
			GinkgoHelper()
			var undo func() error
			Expect(nftest.In(n, func() (err error) { undo, err = m.SetupUndoable(o, addrs); return err })).To(Succeed())
			return func() error { return nftest.In(n, undo) }
		}
		fresh := setupUndo()
		Expect(state()).To(ContainSubstring("10.1.0.0/24"))
		Expect(fresh()).To(Succeed())
		Expect(state()).NotTo(ContainSubstring("10.1.0.0/24"))

		Expect(nftest.In(n, func() error { return m.Setup(o, addrs) })).To(Succeed())
		live := state()
		Expect(setupUndo()()).To(Succeed())
		Expect(state()).To(Equal(live), "same rules, same handles")

		handle := regexp.MustCompile(`(?m)^\s*ip saddr 10\.1\.0\.5 .* # handle (\d+)$`).FindStringSubmatch(live)
		Expect(handle).NotTo(BeNil(), live)
		testutil.NetfilterOutput(n, "nft", "delete", "rule", "inet", nftTableName, "masq_checks", "handle", handle[1])
		// Setup replaces o's rules whole when they differ (not in place, as
		// before), so the undo puts the same rules back under new handles.
		rules := func() string {
			GinkgoHelper()
			return testutil.NetfilterOutput(n, "nft", "list", "ruleset")
		}
		drifted := rules()
		undo := setupUndo()
		Expect(nftest.In(n, func() error { return m.Check(o, addrs) })).To(Succeed(), "the repair put the rule back")
		Expect(undo()).To(Succeed())
		Expect(rules()).To(Equal(drifted))
	})
})
