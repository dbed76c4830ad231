package ipt

import (
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/netfilter/hostport/internal/pmtest"
	"github.com/cniforge/plugins/pkg/testutil"
)

// Tests for mutations that survived every earlier test (issue 29).
var _ = Describe("portmap details no other test looked at", func() {
	opts := pmtest.PortMapOpts
	pm := func(m *iptables.Runner) *iptablesPortMap { return &iptablesPortMap{m: m} }

	// setupNFT writes the nat lines over netlink only: a raw guard line
	// left for it (the guard deleted since the first ADD) must send the
	// whole ADD to iptables-restore, or the guard stays missing.
	It("on iptables-nft, puts back a missing route_localnet guard beside the common ADD's netlink write", func() {
		n := testutil.NewNS()
		seed := opts("ctr-seed", true, pmtest.ManyMappings(2, 30000), "10.9.0.5")
		Expect(nftest.In(n, func() error { return pm(&iptables.Runner{Variant: "nft"}).Setup(seed) })).To(Succeed())
		testutil.NetfilterOutput(n, "iptables-nft", "-t", "raw", "-D", "PREROUTING", "-j", pmGuardChain)
		testutil.NetfilterOutput(n, "iptables-nft", "-t", "raw", "-F", pmGuardChain)
		testutil.NetfilterOutput(n, "iptables-nft", "-t", "raw", "-X", pmGuardChain)

		a := opts("ctr-a", true, pmtest.ManyMappings(1, 31000), "10.9.0.6")
		Expect(nftest.In(n, func() error { return pm(&iptables.Runner{Variant: "nft"}).Setup(a) })).To(Succeed())
		raw := testutil.NetfilterOutput(n, "iptables-nft-save", "-t", "raw")
		Expect(raw).To(ContainSubstring("-A PREROUTING -j " + pmGuardChain))
		Expect(raw).To(ContainSubstring("-A " + pmGuardChain + " " + pmGuardRule))
		Expect(testutil.NetfilterOutput(n, "iptables-nft-save", "-t", "nat")).To(ContainSubstring(pmChain(a.Owner)))
	})

	// conditionsV4/V6 restrict the entry jumps in PREROUTING and OUTPUT.
	It("puts conditionsV4 and conditionsV6 into the entry jumps", func() {
		n := testutil.NewNS()
		a := opts("ctr-a", true, pmtest.ManyMappings(1, 31000), "10.9.0.6", "fd00:9::6")
		a.ConditionsV4 = []string{"!", "-s", "10.200.0.0/16"}
		a.ConditionsV6 = []string{"!", "-s", "fd00:200::/64"}
		Expect(nftest.In(n, func() error { return newIPTablesPortMap().Setup(a) })).To(Succeed())
		for tool, cond := range map[string]string{"iptables-save": "! -s 10.200.0.0/16", "ip6tables-save": "! -s fd00:200::/64"} {
			nat := testutil.NetfilterOutput(n, tool, "-t", "nat")
			for _, c := range []string{"PREROUTING", "OUTPUT"} {
				Expect(nat).To(ContainSubstring("-A "+c+" "+cond+" -m addrtype --dst-type LOCAL -j "+pmDNATChain), tool)
			}
		}
	})
})
