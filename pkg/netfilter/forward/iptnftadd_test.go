package forward

import (
	"net"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
)

// On iptables-nft, a firewall Setup that finds the shared chains and jumps
// in place appends its rules over netlink (appendNFT). Whatever reads them
// (iptables-save, iptables -C and -D, nft) must not be able to tell them
// from iptables-restore's.
var _ = Describe("iptables-nft forward rules appended over netlink", func() {
	seed := netfilter.Owner{Network: "fw", ContainerID: "ctr-seed", IfName: "eth0"}
	o := netfilter.Owner{Network: "fw", ContainerID: "ctr-a", IfName: "eth0"}
	fw := func(m *iptables.Runner) *iptablesForward { return &iptablesForward{ipt: m} }
	rules := func(owner netfilter.Owner, addrs ...string) ForwardRules {
		r := ForwardRules{Owner: owner, Policy: IngressOpen}
		for _, a := range addrs {
			r.Addrs = append(r.Addrs, net.ParseIP(a))
		}
		return r
	}

	// seeded returns a namespace whose filter tables hold another
	// attachment's rules, made by iptables-restore.
	seeded := func() *ns.NetNS {
		GinkgoHelper()
		n := testutil.NewNS()
		Expect(nftest.In(n, func() error {
			return fw(&iptables.Runner{Variant: "nft", NoNFT: true}).Setup(rules(seed, "10.9.0.5", "fd00:9::5"))
		})).To(Succeed())
		return n
	}

	listings := func(n *ns.NetNS) string { GinkgoHelper(); return nftest.NftListings(n, "-t", "filter") }

	DescribeTable("writes exactly what iptables-restore writes, with no process",
		func(addrs ...string) {
			r := rules(o, addrs...)
			viaRestore, viaNetlink := seeded(), seeded()
			Expect(nftest.In(viaRestore, func() error { return fw(&iptables.Runner{Variant: "nft", NoNFT: true}).Setup(r) })).To(Succeed())
			var calls []string
			Expect(nftest.In(viaNetlink, func() error { return fw(&iptables.Runner{Variant: "nft", Run: nftest.CountingRun(&calls)}).Setup(r) })).To(Succeed())
			Expect(calls).To(BeEmpty(), "no iptables process")
			Expect(listings(viaNetlink)).To(Equal(listings(viaRestore)))
			Expect(listings(viaNetlink)).To(ContainSubstring(`id: \"ctr-a\"`))

			// iptables finds every rule by its spec, as upstream's DEL
			// and iptables -D do.
			for _, tool := range []string{"iptables-nft", "ip6tables-nft"} {
				for _, l := range strings.Split(testutil.NetfilterOutput(viaNetlink, tool+"-save", "-t", "filter"), "\n") {
					if !strings.HasPrefix(l, "-A ") || !strings.Contains(l, `id: \"ctr-a\"`) {
						continue
					}
					spec := append([]string{tool, "-t", "filter", "-C"}, nftest.ShellFields(strings.TrimPrefix(l, "-A "))...)
					testutil.NetfilterOutput(viaNetlink, spec...)
				}
			}
			Expect(nftest.In(viaNetlink, func() error { return fw(&iptables.Runner{Variant: "nft"}).Check(r) })).To(Succeed())
			for _, n := range []*ns.NetNS{viaNetlink, viaRestore} {
				Expect(nftest.In(n, func() error { return fw(&iptables.Runner{Variant: "nft"}).Teardown(o, r.Addrs) })).To(Succeed())
			}
			Expect(listings(viaNetlink)).NotTo(ContainSubstring(`id: \"ctr-a\"`))
			Expect(listings(viaNetlink)).To(Equal(listings(viaRestore)))
		},
		Entry("one IPv4 address", "10.1.0.5"),
		Entry("one IPv6 address", "fd00:1::5"),
		Entry("dual stack, two of each", "10.1.0.5", "10.1.0.7", "fd00:1::5", "fd00:1::7"),
	)

	It("leaves a first Setup, which makes the shared chains, to iptables-restore", func() {
		var calls []string
		n := testutil.NewNS()
		Expect(nftest.In(n, func() error {
			return fw(&iptables.Runner{Variant: "nft", Run: nftest.CountingRun(&calls)}).Setup(rules(o, "10.1.0.5"))
		})).To(Succeed())
		Expect(calls).To(ContainElement("iptables-nft-restore"))
	})

	It("leaves a repeated Setup, whose rules exist, to iptables-save and finds nothing to add", func() {
		n := seeded()
		r := rules(o, "10.1.0.5")
		Expect(nftest.In(n, func() error { return fw(&iptables.Runner{Variant: "nft"}).Setup(r) })).To(Succeed())
		before := listings(n)
		var calls []string
		Expect(nftest.In(n, func() error { return fw(&iptables.Runner{Variant: "nft", Run: nftest.CountingRun(&calls)}).Setup(r) })).To(Succeed())
		Expect(calls).To(Equal([]string{"iptables-nft-save"}))
		Expect(listings(n)).To(Equal(before), "no rule twice")
	})

	It("leaves the isolation policies to iptables-restore", func() {
		n := seeded()
		r := rules(o, "10.1.0.5")
		r.Policy, r.Bridge = IngressIsolated, "cni0"
		var calls []string
		Expect(nftest.In(n, func() error { return fw(&iptables.Runner{Variant: "nft", Run: nftest.CountingRun(&calls)}).Setup(r) })).To(Succeed())
		Expect(calls).To(ContainElement("iptables-nft-restore"))
		Expect(nftest.In(n, func() error { return fw(&iptables.Runner{Variant: "nft"}).Check(r) })).To(Succeed())
	})
})
