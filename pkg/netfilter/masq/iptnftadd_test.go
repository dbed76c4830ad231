package masq

import (
	"errors"
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

// On iptables-nft, a Setup that finds the nat table as iptables-nft makes
// it writes its fresh chain over netlink (setupNFT). Whatever reads the
// rules (iptables-save, iptables -C and -D, nft) must not be able to tell
// them from iptables-restore's.
var _ = Describe("iptables-nft masquerade written over netlink", func() {
	seed := netfilter.Owner{Network: "net1", ContainerID: "ctr-seed", IfName: "eth0"}
	o := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
	nft := iptablesCase("nft")

	listings := func(n *ns.NetNS) string { GinkgoHelper(); return nftest.NftListings(n, "-t", "nat") }

	DescribeTable("writes exactly what iptables-restore writes, with no process",
		func(addrs ...string) {
			viaRestore, viaNetlink := seededNAT(seed), seededNAT(seed)
			Expect(nftest.In(viaRestore, func() error {
				return (&iptablesMasq{Runner: nftest.ViaRestore()}).Setup(o, mustCIDRs(addrs...))
			})).To(Succeed())
			var calls []string
			Expect(nftest.In(viaNetlink, func() error { return countingMasq(&calls).Setup(o, mustCIDRs(addrs...)) })).To(Succeed())
			Expect(calls).To(BeEmpty(), "no iptables process")
			Expect(listings(viaNetlink)).To(Equal(listings(viaRestore)))
			Expect(nft.kernel(viaNetlink)).To(ContainSubstring(netfilter.IptablesChain(o)))

			// iptables finds every rule by its spec, as upstream's DEL
			// deletes the POSTROUTING jumps.
			for _, f := range nftnl.Families {
				tool := "iptables-nft"
				if f == nftnl.IPv6 {
					tool = "ip6tables-nft"
				}
				for _, l := range strings.Split(testutil.NetfilterOutput(viaNetlink, tool+"-save", "-t", "nat"), "\n") {
					if !strings.HasPrefix(l, "-A ") || !strings.Contains(l, `id: \"ctr-a\"`) {
						continue
					}
					spec := append([]string{tool, "-t", "nat", "-C"}, nftest.ShellFields(strings.TrimPrefix(l, "-A "))...)
					testutil.NetfilterOutput(viaNetlink, spec...)
				}
			}
			Expect(nftest.In(viaNetlink, func() error { return countingMasq(&calls).Check(o, mustCIDRs(addrs...)) })).To(Succeed())
			calls = nil
			Expect(nftest.In(viaNetlink, func() error { return countingMasq(&calls).Teardown(o) })).To(Succeed())
			Expect(nftest.In(viaRestore, func() error { return countingMasq(&calls).Teardown(o) })).To(Succeed())
			Expect(nft.kernel(viaNetlink)).NotTo(ContainSubstring(netfilter.IptablesChain(o)))
			Expect(nft.kernel(viaNetlink)).To(Equal(nft.kernel(viaRestore)))
			Expect(calls).To(BeEmpty(), "Teardown deletes over netlink too")
		},
		addrCases,
	)

	It("masquerades traffic with the rules it wrote", func() {
		hostNS := seededNAT(seed)
		contNS, outNS := testutil.NewNS(), testutil.NewNS()
		Expect(wireRouter(hostNS, contNS, outNS)).To(Succeed())
		var calls []string
		Expect(nftest.In(hostNS, func() error {
			return countingMasq(&calls).Setup(o, mustCIDRs("10.1.0.5/24", "fd00:1::5/64"))
		})).To(Succeed())
		Expect(calls).To(BeEmpty())
		Expect(testutil.UDPSource(contNS, outNS, "10.99.0.2")).To(Equal("10.99.0.1"))
		Expect(testutil.UDPSource(contNS, outNS, "fd00:99::2")).To(Equal("fd00:99::1"))
	})

	It("leaves a nat table that iptables-nft did not make to iptables-restore", func() {
		n := testutil.NewNS()
		testutil.NetfilterOutput(n, "nft", "add table ip nat; add chain ip nat POSTROUTING { type nat hook postrouting priority 50; }")
		var calls []string
		_ = nftest.In(n, func() error { return countingMasq(&calls).Setup(o, mustCIDRs("10.1.0.5/24")) })
		Expect(calls).To(ContainElement("iptables-nft-restore"))
		m := &iptablesMasq{Runner: &iptables.Runner{Variant: "nft"}}
		Expect(nftest.In(n, func() error { m.Prestart(); return nil })).To(Succeed())
		Expect(m.Prestarted).NotTo(BeNil(), "a restore is prestarted for such a table")
		m.Release()
	})

	It("leaves a repeated Setup, whose chain exists, to iptables-restore", func() {
		n := seededNAT(seed)
		var calls []string
		Expect(nftest.In(n, func() error { return countingMasq(&calls).Setup(o, mustCIDRs("10.1.0.5/24")) })).To(Succeed())
		Expect(calls).To(BeEmpty())
		before := nft.kernel(n)
		Expect(before).To(ContainSubstring(netfilter.IptablesChain(o)))
		Expect(nftest.In(n, func() error { return countingMasq(&calls).Setup(o, mustCIDRs("10.1.0.5/24")) })).To(Succeed())
		Expect(calls).To(Equal([]string{"iptables-nft-restore", "iptables-nft-save"}), "the fresh restore fails, the read finds nothing to change")
		Expect(nft.kernel(n)).To(Equal(before))
	})

	It("undoes the IPv4 rules it wrote when the IPv6 ones fail", func() {
		n := testutil.NewNS()
		Expect(nftest.In(n, func() error {
			return (&iptablesMasq{Runner: &iptables.Runner{Variant: "nft"}}).Setup(seed, mustCIDRs("10.9.0.5/24"))
		})).To(Succeed())
		before := nft.kernel(n)
		m := &iptablesMasq{Runner: &iptables.Runner{Variant: "nft", Run: func(name string, args []string, stdin []byte) ([]byte, error) {
			if strings.HasPrefix(name, "ip6tables") {
				return nil, errors.New("injected failure")
			}
			return iptables.RunCommand(name, args, stdin)
		}}}
		err := nftest.In(n, func() error { return m.Setup(o, mustCIDRs("10.1.0.5/24", "fd00:1::5/64")) })
		Expect(err).To(MatchError(ContainSubstring("injected failure")))
		Expect(nft.kernel(n)).To(Equal(before))
	})

	It("prestarts no restore where it will write over netlink", func() {
		m := &iptablesMasq{Runner: &iptables.Runner{Variant: "nft"}}
		Expect(nftest.In(seededNAT(seed), func() error { m.Prestart(); return nil })).To(Succeed())
		Expect(m.Prestarted).To(BeNil())
	})
})
