package nft

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/netfilter/hostport/internal/pmtest"
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

// check --repair and a second ADD run Setup over a live attachment (see
// hostport/ipt/undo_test.go): the nftables backend's undo too puts back what was there.
var _ = Describe("nftables Setup over a live attachment", func() {
	var n *ns.NetNS
	var p *nftablesPortMap
	opts := pmtest.LiveOpts()
	state := func() string {
		GinkgoHelper()
		return nftest.StableDump(n, []string{"nft", "list", "ruleset"})
	}
	BeforeEach(func() {
		n = testutil.NewNS()
		p = newNFTablesPortMap()
	})
	setup := func() error { return nftest.In(n, func() error { return p.Setup(opts) }) }

	It("keeps the live elements when the batch is refused, and its undo changes nothing", func() {
		Expect(setup()).To(Succeed())
		live := state()
		Expect(live).To(ContainSubstring("id: live"))

		p.failBatch = func(int) bool { return true }
		Expect(setup()).NotTo(Succeed())
		Expect(state()).To(Equal(live))

		p.failBatch = nil
		undo := nftest.SetupUndo(n, p.SetupUndoable, opts)
		Expect(undo()).To(Succeed())
		Expect(state()).To(Equal(live), "a later step's undo leaves the elements that were there")
		Expect(nftest.In(n, func() error { return p.Check(opts) })).To(Succeed())
	})

	It("after drift, the undo of a repair takes back only the element it added", func() {
		Expect(setup()).To(Succeed())
		testutil.NetfilterOutput(n, "nft", "delete", "element", "ip", pmTable, pmPortsMap, "{ udp . 5353 }")
		drifted := state()
		Expect(nftest.In(n, func() error { return p.Check(opts) })).NotTo(Succeed())

		undo := nftest.SetupUndo(n, p.SetupUndoable, opts)
		Expect(nftest.In(n, func() error { return p.Check(opts) })).To(Succeed(), "the repair put the element back")
		Expect(undo()).To(Succeed())
		Expect(state()).To(Equal(drifted))
	})

	It("puts back what a replacing Setup removed, and leaves nothing of a fresh attachment", func() {
		Expect(setup()).To(Succeed())
		live := state()
		other := opts
		other.Mappings = opts.Mappings[:1]
		undo := nftest.SetupUndo(n, p.SetupUndoable, other)
		Expect(state()).NotTo(Equal(live))
		Expect(undo()).To(Succeed())
		Expect(state()).To(Equal(live), "the mappings the replacing Setup removed are back")

		Expect(nftest.In(n, func() error { _, err := p.Teardown(opts.Owner); return err })).To(Succeed())
		undo = nftest.SetupUndo(n, p.SetupUndoable, opts)
		Expect(state()).To(ContainSubstring("id: live"))
		Expect(undo()).To(Succeed())
		Expect(state()).NotTo(ContainSubstring("id: live"))
	})
})
