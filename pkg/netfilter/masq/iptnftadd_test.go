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

	// counting returns an iptables-nft backend that records the processes
	// it runs.
	counting := func(calls *[]string) *iptablesMasq {
		return &iptablesMasq{Runner: &iptables.Runner{Variant: "nft", Run: nftest.CountingRun(calls)}}
	}

	// seeded returns a namespace whose nat tables (IPv4 and IPv6) hold
	// another attachment's rules, made by iptables-restore.
	seeded := func() *ns.NetNS {
		GinkgoHelper()
		n := testutil.NewNS()
		Expect(nftest.In(n, func() error {
			return (&iptablesMasq{Runner: &iptables.Runner{Variant: "nft", NoNFT: true}}).Setup(seed, mustCIDRs("10.9.0.5/24", "fd00:9::5/64"))
		})).To(Succeed())
		return n
	}

	listings := func(n *ns.NetNS) string { GinkgoHelper(); return nftest.NftListings(n, "-t", "nat") }

	DescribeTable("writes exactly what iptables-restore writes, with no process",
		func(addrs ...string) {
			viaRestore, viaNetlink := seeded(), seeded()
			Expect(nftest.In(viaRestore, func() error {
				return (&iptablesMasq{Runner: &iptables.Runner{Variant: "nft", NoNFT: true}}).Setup(o, mustCIDRs(addrs...))
			})).To(Succeed())
			var calls []string
			Expect(nftest.In(viaNetlink, func() error { return counting(&calls).Setup(o, mustCIDRs(addrs...)) })).To(Succeed())
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
			Expect(nftest.In(viaNetlink, func() error { return counting(&calls).Check(o, mustCIDRs(addrs...)) })).To(Succeed())
			calls = nil
			Expect(nftest.In(viaNetlink, func() error { return counting(&calls).Teardown(o) })).To(Succeed())
			Expect(nftest.In(viaRestore, func() error { return counting(&calls).Teardown(o) })).To(Succeed())
			Expect(nft.kernel(viaNetlink)).NotTo(ContainSubstring(netfilter.IptablesChain(o)))
			Expect(nft.kernel(viaNetlink)).To(Equal(nft.kernel(viaRestore)))
			Expect(calls).To(BeEmpty(), "Teardown deletes over netlink too")
		},
		Entry("one IPv4 address", "10.1.0.5/24"),
		Entry("a prefix that ends inside a byte", "10.1.0.5/20"),
		Entry("a short prefix", "10.1.0.5/7"),
		Entry("two addresses of one subnet", "10.1.0.5/24", "10.1.0.6/24"),
		Entry("two subnets", "10.1.0.5/24", "10.2.0.5/16"),
		Entry("one IPv6 address", "fd00:1::5/64"),
		Entry("an IPv6 prefix that ends inside a byte", "fd00:1::5/61"),
		Entry("dual stack", "10.1.0.5/24", "fd00:1::5/64"),
	)

	It("masquerades traffic with the rules it wrote", func() {
		hostNS := seeded()
		contNS, outNS := testutil.NewNS(), testutil.NewNS()
		Expect(wireRouter(hostNS, contNS, outNS)).To(Succeed())
		var calls []string
		Expect(nftest.In(hostNS, func() error {
			return counting(&calls).Setup(o, mustCIDRs("10.1.0.5/24", "fd00:1::5/64"))
		})).To(Succeed())
		Expect(calls).To(BeEmpty())
		Expect(testutil.UDPSource(contNS, outNS, "10.99.0.2")).To(Equal("10.99.0.1"))
		Expect(testutil.UDPSource(contNS, outNS, "fd00:99::2")).To(Equal("fd00:99::1"))
	})

	It("leaves a nat table that iptables-nft did not make to iptables-restore", func() {
		n := testutil.NewNS()
		testutil.NetfilterOutput(n, "nft", "add table ip nat; add chain ip nat POSTROUTING { type nat hook postrouting priority 50; }")
		var calls []string
		_ = nftest.In(n, func() error { return counting(&calls).Setup(o, mustCIDRs("10.1.0.5/24")) })
		Expect(calls).To(ContainElement("iptables-nft-restore"))
		m := &iptablesMasq{Runner: &iptables.Runner{Variant: "nft"}}
		Expect(nftest.In(n, func() error { m.Prestart(); return nil })).To(Succeed())
		Expect(m.Prestarted).NotTo(BeNil(), "a restore is prestarted for such a table")
		m.Release()
	})

	It("leaves a repeated Setup, whose chain exists, to iptables-restore", func() {
		n := seeded()
		var calls []string
		Expect(nftest.In(n, func() error { return counting(&calls).Setup(o, mustCIDRs("10.1.0.5/24")) })).To(Succeed())
		Expect(calls).To(BeEmpty())
		before := nft.kernel(n)
		Expect(before).To(ContainSubstring(netfilter.IptablesChain(o)))
		Expect(nftest.In(n, func() error { return counting(&calls).Setup(o, mustCIDRs("10.1.0.5/24")) })).To(Succeed())
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
		Expect(nftest.In(seeded(), func() error { m.Prestart(); return nil })).To(Succeed())
		Expect(m.Prestarted).To(BeNil())
	})
})
