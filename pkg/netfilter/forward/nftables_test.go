package forward

import (
	"net"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
)

var _ = Describe("nftables forward filter", func() {
	o := netfilter.Owner{Network: "fw", ContainerID: "ctr-a", IfName: "eth0"}
	r := ForwardRules{Owner: o, Addrs: []net.IP{net.ParseIP("10.1.0.5"), net.ParseIP("fd00:1::5")},
		Policy: IngressIsolated, Bridge: "br1", MarkBit: DefaultMarkBit}
	var curNS *ns.NetNS
	listing := func() string {
		GinkgoHelper()
		// nft prints one blank line between chains; our render has none.
		s := testutil.NetfilterOutput(curNS, "nft", "list", "table", "inet", fwdNFTTable)
		return regexp.MustCompile(`\n\s*\n`).ReplaceAllString(s, "\n")
	}
	BeforeEach(func() { curNS = testutil.NewNS() })

	It("holds what the render says, as nft lists it, and Setup twice changes nothing", func() {
		m := newNFTablesForward()
		Expect(nftest.In(curNS, func() error { return m.Setup(r) })).To(Succeed())
		Expect(listing()).To(Equal(renderFwdNFT(r)))
		handles := testutil.NetfilterOutput(curNS, "nft", "-a", "list", "ruleset")
		Expect(nftest.In(curNS, func() error { return m.Setup(r) })).To(Succeed())
		Expect(testutil.NetfilterOutput(curNS, "nft", "-a", "list", "ruleset")).To(Equal(handles))
		Expect(nftest.In(curNS, func() error { return m.Check(r) })).To(Succeed())
	})

	It("accepts the same rules written by nft, and Setup leaves them", func() {
		Expect(nftest.In(curNS, func() error { _, err := nftest.NftRun(renderFwdNFT(r), "-f", "-"); return err })).To(Succeed())
		before := testutil.NetfilterOutput(curNS, "nft", "-a", "list", "ruleset")
		m := newNFTablesForward()
		Expect(nftest.In(curNS, func() error { return m.Check(r) })).To(Succeed())
		Expect(nftest.In(curNS, func() error { return m.Setup(r) })).To(Succeed())
		Expect(testutil.NetfilterOutput(curNS, "nft", "-a", "list", "ruleset")).To(Equal(before))
	})

	It("inserts the delegation rule into a drop-by-default iptables-nft FORWARD, once, shown by iptables-nft", func() {
		Expect(nftest.In(curNS, func() error {
			_, err := nftest.NftRun("", "add", "table", "ip", "filter")
			if err == nil {
				_, err = nftest.NftRun("", "add", "chain", "ip", "filter", "FORWARD", "{ type filter hook forward priority 0; policy drop; }")
			}
			return err
		})).To(Succeed())
		m := newNFTablesForward()
		Expect(nftest.In(curNS, func() error { return m.Setup(r) })).To(Succeed())
		o2 := r
		o2.Owner.ContainerID = "ctr-b"
		o2.Addrs = []net.IP{net.ParseIP("10.1.0.6")}
		Expect(nftest.In(curNS, func() error { return m.Setup(o2) })).To(Succeed())
		save := testutil.NetfilterOutput(curNS, "iptables-nft", "-S", "FORWARD")
		Expect(strings.Count(save, "--mark 0x1000/0x1000")).To(Equal(1), save)
		Expect(save).To(ContainSubstring(`-A FORWARD -m mark --mark 0x1000/0x1000 -m comment --comment "` + fwdDelegComment + `" -j ACCEPT`))
		// No ip6 filter table: nothing is made there.
		Expect(testutil.NetfilterOutput(curNS, "nft", "list", "tables")).NotTo(ContainSubstring("ip6 filter"))
		Expect(nftest.In(curNS, func() error { return m.Check(r) })).To(Succeed())
		Expect(nftest.In(curNS, func() error { _, err := nftest.NftRun("", "flush", "chain", "ip", "filter", "FORWARD"); return err })).To(Succeed())
		err := nftest.In(curNS, func() error { return m.Check(r) })
		Expect(err).To(MatchError(netfilter.ErrMissing))
		Expect(err.Error()).To(ContainSubstring("ip filter FORWARD (drops by default): meta mark & 0x00001000 == 0x00001000 accept"))
	})

	It("tears down only the owner's rules, and GC only unlisted ones of its network", func() {
		m := newNFTablesForward()
		o2, o3 := r, r
		o2.Owner.ContainerID, o2.Addrs = "ctr-b", []net.IP{net.ParseIP("10.1.0.6")}
		o3.Owner.Network, o3.Addrs = "other", []net.IP{net.ParseIP("10.1.0.7")}
		for _, x := range []ForwardRules{r, o2, o3} {
			Expect(nftest.In(curNS, func() error { return m.Setup(x) })).To(Succeed())
		}
		Expect(nftest.In(curNS, func() error { return m.Teardown(o, nil) })).To(Succeed())
		Expect(nftest.In(curNS, func() error { return m.Teardown(o, nil) })).To(Succeed(), "absent is success")
		l := listing()
		Expect(l).NotTo(ContainSubstring("10.1.0.5"))
		Expect(l).To(ContainSubstring("10.1.0.6"))
		Expect(nftest.In(curNS, func() error { return m.GC("fw", nil) })).To(Succeed())
		l = listing()
		Expect(l).NotTo(ContainSubstring("10.1.0.6"))
		Expect(l).To(ContainSubstring("10.1.0.7"), "another network's rules stay")
		Expect(l).To(ContainSubstring(`iifname "br1" oifname "br1" drop`), "shared rules stay")
	})
})
