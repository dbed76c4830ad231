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
	})
},
	Entry("iptables-nft, netlink ways", "nft", false),
	Entry("iptables-nft, restore only", "nft", true),
	Entry("iptables-legacy", "legacy", false),
)
