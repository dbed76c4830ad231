package masq

import (
	"net"
	"regexp"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

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
		return nftest.IptablesState(n, variant, "nat")
	}
	BeforeEach(func() {
		n = testutil.NewNS()
		m = &iptablesMasq{Runner: &iptables.Runner{Variant: variant, NoNFT: noNFT}}
	})
	setup := func() error { return nftest.In(n, func() error { return m.Setup(o, addrs) }) }
	setupUndoable := func(addrs []*net.IPNet) (func() error, error) { return m.SetupUndoable(o, addrs) }

	It("keeps the live rules when a later family fails", func() {
		Expect(setup()).To(Succeed())
		live := state()
		Expect(live).To(ContainSubstring(chain))
		m.failFamily = nftest.FailIPv6
		Expect(setup()).To(MatchError(nftest.ErrInjected))
		Expect(state()).To(Equal(live), "IPv4, done before IPv6 failed, is as it was")
		m.failFamily = nil
		Expect(nftest.In(n, func() error { return m.Check(o, addrs) })).To(Succeed())
	})

	It("after drift, a failed repair leaves what drift left", func() {
		Expect(setup()).To(Succeed())
		nftest.DeleteIPv4Rule(n, variant, "nat", chain+` -d 10\.1\.0\.0/24 .*-j ACCEPT`)
		drifted := state()
		Expect(nftest.In(n, func() error { return m.Check(o, addrs) })).NotTo(Succeed())
		m.failFamily = nftest.FailIPv6
		Expect(setup()).To(MatchError(nftest.ErrInjected))
		Expect(state()).To(Equal(drifted))
	})

	It("leaves nothing of a fresh attachment", func() {
		m.failFamily = nftest.FailIPv6
		Expect(setup()).To(MatchError(nftest.ErrInjected))
		Expect(state()).NotTo(ContainSubstring(chain))
		m.failFamily = nil
		undo := nftest.SetupUndo(n, setupUndoable, addrs)
		Expect(state()).To(ContainSubstring(chain))
		Expect(undo()).To(Succeed())
		Expect(state()).NotTo(ContainSubstring(chain), "nor does the undo of a fresh one")
	})

	It("undoes a repair over drift back to what drift left, and changes nothing over a live attachment", func() {
		Expect(setup()).To(Succeed())
		live := state()
		Expect(nftest.SetupUndo(n, setupUndoable, addrs)()).To(Succeed())
		Expect(state()).To(Equal(live))

		nftest.DeleteIPv4Rule(n, variant, "nat", chain+` -d 10\.1\.0\.0/24 .*-j ACCEPT`)
		drifted := state()
		undo := nftest.SetupUndo(n, setupUndoable, addrs)
		Expect(nftest.In(n, func() error { return m.Check(o, addrs) })).To(Succeed(), "the repair put the rule back")
		Expect(undo()).To(Succeed())
		Expect(state()).To(Equal(drifted))
	})
}, nftest.IptablesVariants())

var _ = Describe("nftables SetupUndoable over a live attachment", func() {
	It("changes nothing over a live attachment, takes back only what a repair added, leaves nothing of a fresh one", func() {
		n := testutil.NewNS()
		m := newNFTablesMasq()
		o := netfilter.Owner{Network: "mq", ContainerID: "live", IfName: "eth0"}
		addrs := []*net.IPNet{{IP: net.ParseIP("10.1.0.5"), Mask: net.CIDRMask(24, 32)}, {IP: net.ParseIP("fd00:1::5"), Mask: net.CIDRMask(64, 128)}}
		state := func() string {
			GinkgoHelper()
			return nftest.StableDump(n, []string{"nft", "-a", "list", "ruleset"})
		}
		setupUndoable := func(addrs []*net.IPNet) (func() error, error) { return m.SetupUndoable(o, addrs) }
		fresh := nftest.SetupUndo(n, setupUndoable, addrs)
		Expect(state()).To(ContainSubstring("10.1.0.0/24"))
		Expect(fresh()).To(Succeed())
		Expect(state()).NotTo(ContainSubstring("10.1.0.0/24"))

		Expect(nftest.In(n, func() error { return m.Setup(o, addrs) })).To(Succeed())
		live := state()
		Expect(nftest.SetupUndo(n, setupUndoable, addrs)()).To(Succeed())
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
		undo := nftest.SetupUndo(n, setupUndoable, addrs)
		Expect(nftest.In(n, func() error { return m.Check(o, addrs) })).To(Succeed(), "the repair put the rule back")
		Expect(undo()).To(Succeed())
		Expect(rules()).To(Equal(drifted))
	})
})
