package forward

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

func liveRules() ForwardRules {
	return ForwardRules{Owner: netfilter.Owner{Network: "fw", ContainerID: "live", IfName: "eth0"}, Policy: IngressOpen,
		Addrs: []net.IP{net.ParseIP("10.1.0.5"), net.ParseIP("fd00:1::5")}, MarkBit: DefaultMarkBit}
}

// check --repair and a runtime's second ADD run Setup over a live
// attachment: when it fails, or a later step's failure runs its undo, the
// allow rules that were there stay (they carry a running pod's traffic);
// only what this Setup added goes.
var _ = DescribeTableSubtree("iptables forward Setup over a live attachment", func(variant string, noNFT bool) {
	var n *ns.NetNS
	var m *iptablesForward
	r := liveRules()
	state := func() string {
		GinkgoHelper()
		return nftest.IptablesState(n, variant, "filter")
	}
	BeforeEach(func() {
		n = testutil.NewNS()
		m = &iptablesForward{ipt: &iptables.Runner{Variant: variant, NoNFT: noNFT}}
	})
	setup := func() error { return nftest.In(n, func() error { return m.Setup(r) }) }
	own := `id: \"live\"`

	It("keeps the live rules when a later family fails, and its undo changes nothing", func() {
		Expect(setup()).To(Succeed())
		live := state()
		Expect(live).To(ContainSubstring("-s 10.1.0.5/32"))

		m.failFamily = nftest.FailIPv6
		Expect(setup()).To(MatchError(nftest.ErrInjected))
		Expect(state()).To(Equal(live), "IPv4, done before IPv6 failed, is as it was")

		m.failFamily = nil
		undo := nftest.SetupUndo(n, m.SetupUndoable, r)
		Expect(undo()).To(Succeed())
		Expect(state()).To(Equal(live), "a later step's undo leaves the rules that were there")
		Expect(nftest.In(n, func() error { return m.Check(r) })).To(Succeed())
	})

	It("after drift, a failed repair leaves what drift left, and its undo takes back only the rule it added", func() {
		Expect(setup()).To(Succeed())
		nftest.DeleteIPv4Rule(n, variant, "filter", `CNI-FORWARD -d 10\.1\.0\.5/32 .*`)
		drifted := state()
		Expect(nftest.In(n, func() error { return m.Check(r) })).NotTo(Succeed())

		m.failFamily = nftest.FailIPv6
		Expect(setup()).To(MatchError(nftest.ErrInjected))
		Expect(state()).To(Equal(drifted))

		m.failFamily = nil
		undo := nftest.SetupUndo(n, m.SetupUndoable, r)
		Expect(nftest.In(n, func() error { return m.Check(r) })).To(Succeed(), "the repair put the rule back")
		Expect(undo()).To(Succeed())
		Expect(state()).To(Equal(drifted), "its undo takes that rule out again, and only it")
	})

	It("puts back what a replacing Setup removed, and leaves nothing of a fresh attachment", func() {
		Expect(setup()).To(Succeed())
		live := state()
		moved := r
		moved.Addrs = []net.IP{net.ParseIP("10.1.0.9"), net.ParseIP("fd00:1::5")}
		undo := nftest.SetupUndo(n, m.SetupUndoable, moved)
		Expect(state()).NotTo(ContainSubstring("10.1.0.5/32"))
		Expect(undo()).To(Succeed())
		Expect(state()).To(Equal(live), "the rules the replacing Setup removed are back")

		Expect(nftest.In(n, func() error { return m.Teardown(r.Owner, nil) })).To(Succeed())
		Expect(state()).NotTo(ContainSubstring(own))
		m.failFamily = nftest.FailIPv6
		Expect(setup()).To(MatchError(nftest.ErrInjected))
		Expect(state()).NotTo(ContainSubstring(own), "a failed fresh Setup leaves nothing")
		m.failFamily = nil
		undo = nftest.SetupUndo(n, m.SetupUndoable, r)
		Expect(state()).To(ContainSubstring(own))
		Expect(undo()).To(Succeed())
		Expect(state()).NotTo(ContainSubstring(own), "nor does the undo of a fresh one")
	})
}, nftest.IptablesVariants())

var _ = Describe("nftables forward Setup's undo over a live attachment", func() {
	var n *ns.NetNS
	m := newNFTablesForward()
	r := liveRules()
	state := func() string {
		GinkgoHelper()
		return nftest.StableDump(n, []string{"nft", "-a", "list", "ruleset"})
	}
	BeforeEach(func() { n = testutil.NewNS() })

	It("changes nothing over a live attachment, takes back only what a repair added, puts back what a replacing Setup removed", func() {
		Expect(nftest.In(n, func() error { return m.Setup(r) })).To(Succeed())
		live := state()
		Expect(nftest.SetupUndo(n, m.SetupUndoable, r)()).To(Succeed())
		Expect(state()).To(Equal(live), "same rules, same handles")

		moved := r
		moved.Addrs = []net.IP{net.ParseIP("10.1.0.9"), net.ParseIP("fd00:1::5")}
		undo := nftest.SetupUndo(n, m.SetupUndoable, moved)
		Expect(state()).NotTo(ContainSubstring("10.1.0.5 "))
		Expect(undo()).To(Succeed())
		Expect(nftest.In(n, func() error { return m.Check(r) })).To(Succeed(), "the rules the replacing Setup removed are back")
		Expect(nftest.In(n, func() error { return m.Check(moved) })).NotTo(Succeed(), "and its own are gone")

		handle := regexp.MustCompile(`ip daddr 10\.1\.0\.5 .* # handle (\d+)`).FindStringSubmatch(state())
		Expect(handle).NotTo(BeNil())
		testutil.NetfilterOutput(n, "nft", "delete", "rule", "inet", fwdNFTTable, fwdNFTAllow, "handle", handle[1])
		drifted := state()
		undo = nftest.SetupUndo(n, m.SetupUndoable, r)
		Expect(nftest.In(n, func() error { return m.Check(r) })).To(Succeed(), "the repair put the rule back")
		Expect(undo()).To(Succeed())
		Expect(state()).To(Equal(drifted), "its undo takes that rule out again, and only it")
	})

	It("leaves nothing of a fresh attachment", func() {
		undo := nftest.SetupUndo(n, m.SetupUndoable, r)
		Expect(state()).To(ContainSubstring("10.1.0.5"))
		Expect(undo()).To(Succeed())
		Expect(state()).NotTo(ContainSubstring("10.1.0.5"))
	})
})
