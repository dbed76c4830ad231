package forward

import (
	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
	"net"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/testutil"
)

// check --repair runs firewall's ADD again on a live attachment (issue 29):
// the pod's rules that are there must stay (same handles), only the
// missing one is added.
var _ = Describe("nftables forward filter Setup over a live attachment", func() {
	It("keeps the pod's present allow rules and adds only the missing one", func() {
		n := testutil.NewNS()
		r := ForwardRules{Owner: netfilter.Owner{Network: "fw", ContainerID: "ctr-a", IfName: "eth0"},
			Addrs: []net.IP{net.ParseIP("10.1.0.5"), net.ParseIP("fd00:1::5")}, MarkBit: DefaultMarkBit}
		m := newNFTablesForward()
		Expect(nftest.In(n, func() error { return m.Setup(r) })).To(Succeed())
		// The allow chain's rules with their handles ("... # handle N").
		allow := func() []string {
			GinkgoHelper()
			out := testutil.NetfilterOutput(n, "nft", "-a", "list", "chain", "inet", fwdNFTTable, fwdNFTAllow)
			var rules []string
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, "# handle") && !strings.Contains(l, "chain ") {
					rules = append(rules, strings.TrimSpace(l))
				}
			}
			return rules
		}
		before := allow()
		Expect(len(before)).To(BeNumerically(">=", 2), "%v", before)
		gone := before[len(before)-1]
		handle := regexp.MustCompile(`# handle (\d+)$`).FindStringSubmatch(gone)
		Expect(handle).NotTo(BeNil(), gone)
		testutil.NetfilterOutput(n, "nft", "delete", "rule", "inet", fwdNFTTable, fwdNFTAllow, "handle", handle[1])
		Expect(nftest.In(n, func() error { return m.Check(r) })).NotTo(Succeed())

		Expect(nftest.In(n, func() error { return m.Setup(r) })).To(Succeed())
		after := allow()
		Expect(after).To(HaveLen(len(before)))
		Expect(after[:len(before)-1]).To(Equal(before[:len(before)-1]), "the rules that were there keep their handles")
		Expect(nftest.In(n, func() error { return m.Check(r) })).To(Succeed())
	})
})
