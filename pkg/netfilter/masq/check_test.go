package masq

import (
	"fmt"
	"os/exec"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// What Check must look at, each spec breaking one thing behind the
// backend's back (issue 8: mutations of Check that no test caught).

var _ = Describe("iptables Check", func() {
	It("asks for the interface's own markers in a chain shared with another interface", func() {
		hostNS := testutil.NewNS()
		m := &iptablesMasq{Runner: &iptables.Runner{Variant: "nft"}}
		eth0 := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
		eth1 := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth1"}
		addrs0, addrs1 := mustCIDRs("10.1.0.5/24"), mustCIDRs("10.2.0.5/24")
		Expect(nftest.In(hostNS, func() error { return m.Setup(eth0, addrs0) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Setup(eth1, addrs1) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Check(eth0, addrs0) })).To(Succeed())

		// eth0's marker goes; eth1's stay, so the chain is still ours (a
		// chain without any marker has upstream's layout, where markers
		// are not asked for).
		marker := desiredIPTables(eth0, nftnl.IPv4, addrs0).markers[0].spec
		Expect(nftest.In(hostNS, func() error {
			cmd := exec.Command(m.Tool(nftnl.IPv4, "restore"), "--noflush")
			cmd.Stdin = strings.NewReader(fmt.Sprintf("*nat\n-D %s %s\nCOMMIT\n", netfilter.IptablesChain(eth0), marker))
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
			return nil
		})).To(Succeed())
		err := nftest.In(hostNS, func() error { return m.Check(eth0, addrs0) })
		Expect(err).To(MatchError(netfilter.ErrMissing))
		Expect(err.Error()).To(ContainSubstring(marker))
		Expect(nftest.In(hostNS, func() error { return m.Check(eth1, addrs1) })).To(Succeed())

		Expect(nftest.In(hostNS, func() error { return m.Setup(eth0, addrs0) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Check(eth0, addrs0) })).To(Succeed())
	})
})

var _ = Describe("nftables Check", func() {
	o := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
	var hostNS *ns.NetNS
	BeforeEach(func() { hostNS = testutil.NewNS() })

	load := func(script string) {
		GinkgoHelper()
		Expect(nftest.In(hostNS, func() error { _, err := nftest.NftRun(script, "-f", "-"); return err })).To(Succeed())
	}

	It("asks for every rule of the base chain", func() {
		m := newNFTablesMasq()
		addrs := mustCIDRs("10.1.0.5/24", "fd00:1::5/64")
		Expect(nftest.In(hostNS, func() error { return m.Setup(o, addrs) })).To(Succeed())
		for _, gone := range []string{"goto " + nftMasqChain, "ip daddr 224.0.0.0/4 return", "ip6 daddr ff00::/8 return"} {
			By("deleting " + gone)
			Expect(nftest.In(hostNS, func() error { return nftDeleteInetRuleWith(nftBaseChain, gone) })).To(Succeed())
			err := nftest.In(hostNS, func() error { return m.Check(o, addrs) })
			Expect(err).To(MatchError(netfilter.ErrMissing))
			Expect(err.Error()).To(ContainSubstring("chain " + nftBaseChain + ": " + gone))
			Expect(nftest.In(hostNS, func() error { return m.Setup(o, addrs) })).To(Succeed())
			Expect(nftest.In(hostNS, func() error { return m.Check(o, addrs) })).To(Succeed())
		}
	})

	// The base chain's rules are right in both, but the chain is not a nat
	// chain on postrouting. The masquerade chain stays empty (the kernel
	// refuses masquerade reachable from anything else), so Check is asked
	// about no address: only the base chain is judged.
	DescribeTable("asks for a nat chain on the postrouting hook",
		func(chainType, hook string) {
			script := strings.Replace(renderNFTables(o, nil),
				"type nat hook postrouting priority srcnat;", "type "+chainType+" hook "+hook+" priority 100;", 1)
			Expect(script).To(ContainSubstring("hook " + hook + " priority 100"))
			load(script)
			err := nftest.In(hostNS, func() error { return newNFTablesMasq().Check(o, nil) })
			Expect(err).To(MatchError(netfilter.ErrMissing))
			Expect(err.Error()).To(ContainSubstring("chain " + nftBaseChain + " as a nat postrouting chain"))
		},
		Entry("a filter chain", "filter", "postrouting"),
		Entry("a nat chain on output", "nat", "output"),
		Entry("a nat chain on prerouting", "nat", "prerouting"),
	)

	It("accepts the nat postrouting chain with its rules (the control of the table above)", func() {
		load(renderNFTables(o, nil))
		Expect(nftest.In(hostNS, func() error { return newNFTablesMasq().Check(o, nil) })).To(Succeed())
	})
})

// nftDeleteInetRuleWith deletes, with nft, the first rule of chain in our
// inet masquerade table whose listing contains needle.
func nftDeleteInetRuleWith(chain, needle string) error {
	out, err := nftest.NftRun("", "-a", "list", "chain", "inet", nftTableName, chain)
	if err != nil {
		return err
	}
	for _, l := range strings.Split(out, "\n") {
		if !strings.Contains(l, needle) {
			continue
		}
		_, h, ok := strings.Cut(l, "# handle ")
		if !ok {
			continue
		}
		_, err := nftest.NftRun("", "delete", "rule", "inet", nftTableName, chain, "handle", strings.TrimSpace(h))
		return err
	}
	return fmt.Errorf("no rule with %q in chain %s: %s", needle, chain, out)
}
