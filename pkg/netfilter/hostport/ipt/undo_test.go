package ipt

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/netfilter/hostport/internal/pmtest"
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

// check --repair, podman's network reload and a runtime's second ADD run
// Setup over a live attachment: when it fails, or a later step's failure
// runs its undo, the forwards that were there stay (they carry a running
// pod's traffic); only what this Setup added goes.
var _ = DescribeTableSubtree("iptables Setup over a live attachment", func(variant string, noNFT bool) {
	var n *ns.NetNS
	var p *iptablesPortMap
	opts := pmtest.LiveOpts()
	chain := pmChain(opts.Owner)
	state := func() string {
		GinkgoHelper()
		return nftest.IptablesState(n, variant, "nat")
	}
	BeforeEach(func() {
		n = testutil.NewNS()
		p = &iptablesPortMap{m: &iptables.Runner{Variant: variant, NoNFT: noNFT}}
	})
	setup := func() error { return nftest.In(n, func() error { return p.Setup(opts) }) }

	It("keeps the live rules when a later family fails, and its undo changes nothing", func() {
		Expect(setup()).To(Succeed())
		live := state()
		Expect(live).To(ContainSubstring(chain))

		p.failFamily = nftest.FailIPv6
		Expect(setup()).To(MatchError(nftest.ErrInjected))
		Expect(state()).To(Equal(live), "IPv4, done before IPv6 failed, is as it was")

		p.failFamily = nil
		undo := nftest.SetupUndo(n, p.SetupUndoable, opts)
		Expect(undo()).To(Succeed())
		Expect(state()).To(Equal(live), "a later step's undo leaves the rules that were there")
		Expect(nftest.In(n, func() error { return p.Check(opts) })).To(Succeed())
	})

	It("after drift, a failed repair leaves what drift left, and takes back only the rule it inserted", func() {
		Expect(setup()).To(Succeed())
		// Drift: the IPv4 DNAT rule of 8443 goes from the attachment's chain.
		nftest.DeleteIPv4Rule(n, variant, "nat", chain+` .*--dport 8443 -j DNAT .*`)
		drifted := state()

		p.failFamily = nftest.FailIPv6
		Expect(setup()).To(MatchError(nftest.ErrInjected))
		Expect(state()).To(Equal(drifted))

		p.failFamily = nil
		undo := nftest.SetupUndo(n, p.SetupUndoable, opts)
		Expect(nftest.In(n, func() error { return p.Check(opts) })).To(Succeed(), "the repair put the rule back")
		Expect(undo()).To(Succeed())
		Expect(state()).To(Equal(drifted), "its undo takes that rule out again, and only it")
	})

	It("leaves nothing of a fresh attachment, failing or undone", func() {
		p.failFamily = nftest.FailIPv6
		Expect(setup()).To(MatchError(nftest.ErrInjected))
		Expect(state()).NotTo(ContainSubstring(chain))

		p.failFamily = nil
		undo := nftest.SetupUndo(n, p.SetupUndoable, opts)
		Expect(state()).To(ContainSubstring(chain))
		Expect(undo()).To(Succeed())
		Expect(state()).NotTo(ContainSubstring(chain))
		Expect(state()).NotTo(ContainSubstring("dnat name"))
	})
}, nftest.IptablesVariants())
