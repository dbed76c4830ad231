package masq

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/google/nftables"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

var _ = Describe("nftables rules compiled by nft", func() {
	o := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
	addrs := mustCIDRs("10.1.0.5/24", "fd00:1::5/64")

	It("are the same as ours to Check and Setup", func() {
		hostNS := testutil.NewNS()
		// What upstream's plugins (through nft) write: nft compiles prefix
		// matches to short payload loads, not to a full load and a mask.
		script := renderNFTables(o, addrs)
		Expect(nftest.In(hostNS, func() error { _, err := nftest.NftRun(script, "-f", "-"); return err })).To(Succeed())
		before := nftListing(hostNS)

		m := newNFTablesMasq()
		Expect(nftest.In(hostNS, func() error { return m.Check(o, addrs) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Setup(o, addrs) })).To(Succeed())
		Expect(nftListing(hostNS)).To(Equal(before), "Setup rewrote equivalent rules")

		// Another attachment merges in without touching the base chain.
		o2 := netfilter.Owner{Network: "net1", ContainerID: "ctr-b", IfName: "eth0"}
		Expect(nftest.In(hostNS, func() error { return m.Setup(o2, mustCIDRs("10.1.0.6/24")) })).To(Succeed())
		after := nftListing(hostNS)
		base := func(s string) string {
			_, rest, _ := strings.Cut(s, "chain "+nftBaseChain)
			head, _, _ := strings.Cut(rest, "}")
			return head
		}
		Expect(base(after)).To(Equal(base(before)))
		Expect(nftest.In(hostNS, func() error { return m.Check(o, addrs) })).To(Succeed())
	})

	It("render like ours", func() {
		hostNS := testutil.NewNS()
		script := renderNFTables(o, addrs)
		Expect(nftest.In(hostNS, func() error { _, err := nftest.NftRun(script, "-f", "-"); return err })).To(Succeed())
		var s nftState
		Expect(nftest.In(hostNS, func() error {
			c, err := nftnl.OpenNFT()
			if err != nil {
				return err
			}
			defer c.CloseLasting()
			s, err = newNFTablesMasq().read(c)
			return err
		})).To(Succeed())
		Expect(renderNFTTable(nftRulesFrom(s.baseRules), nftRulesFrom(s.masqRules))).To(Equal(script))
	})
})

func nftRulesFrom(rs []*nftables.Rule) []nftnl.NftRule {
	out := make([]nftnl.NftRule, len(rs))
	for i, r := range rs {
		out[i] = nftnl.NftRuleFrom(r)
	}
	return out
}

// nftListing is the table with rule handles, which change when a rule is
// rewritten.
func nftListing(n *ns.NetNS) string {
	GinkgoHelper()
	return testutil.NetfilterOutput(n, "nft", "-a", "list", "table", "inet", nftTableName)
}
