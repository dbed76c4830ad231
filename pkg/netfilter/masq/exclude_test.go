package masq

import (
	"fmt"
	"net"
	"os/exec"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// excluding returns m (a backend of this package) with exclude as its
// ipMasqExcludeCIDRs, as NewMasq sets them.
func excluding(m netfilter.Masq, exclude []*net.IPNet) netfilter.Masq {
	switch b := m.(type) {
	case *iptablesMasq:
		b.exclude = exclude
	case *nftablesMasq:
		b.exclude = exclude
	default:
		Fail("no backend of this package")
	}
	return m
}

// wireTwoOutsides is wireRouter with two networks beyond the host on the
// outside's link: 10.99.0.0/24 (fd00:99::/64), which the specs exclude
// from masquerade (another node's pods, say), and 10.98.0.0/24
// (fd00:98::/64), which they do not (the world).
func wireTwoOutsides(hostNS, contNS, outNS *ns.NetNS) {
	GinkgoHelper()
	Expect(testutil.ConnectNS(
		testutil.VethEnd{NS: hostNS, Name: "vc", Addrs: []string{"10.1.0.1/24", "fd00:1::1/64"}},
		testutil.VethEnd{NS: contNS, Name: "eth0", Addrs: []string{"10.1.0.5/24", "fd00:1::5/64"}},
	)).To(Succeed())
	Expect(testutil.ConnectNS(
		testutil.VethEnd{NS: hostNS, Name: "vo", Addrs: []string{"10.99.0.1/24", "10.98.0.1/24", "fd00:99::1/64", "fd00:98::1/64"}},
		testutil.VethEnd{NS: outNS, Name: "eth0", Addrs: []string{"10.99.0.2/24", "10.98.0.2/24", "fd00:99::2/64", "fd00:98::2/64"}},
	)).To(Succeed())
	Expect(defaultRoutes(contNS, "eth0", "10.1.0.1", "fd00:1::1")).To(Succeed())
	Expect(hostNS.Do(func() error {
		if err := ip.SetSysctl("net/ipv4/ip_forward", "1"); err != nil {
			return err
		}
		return ip.SetSysctl("net/ipv6/conf/all/forwarding", "1")
	})).To(Succeed())
}

var _ = DescribeTableSubtree("ipMasqExcludeCIDRs (beyond upstream)", func(bc backendCase) {
	var (
		hostNS *ns.NetNS
		a      = netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
		cont   = mustCIDRs("10.1.0.5/24", "fd00:1::5/64")
	)
	exclude := func() []*net.IPNet {
		_, x4, _ := net.ParseCIDR("10.99.0.0/16")
		_, x6, _ := net.ParseCIDR("fd00:99::/64")
		return []*net.IPNet{x4, x6}
	}
	BeforeEach(func() {
		hostNS = testutil.NewNS()
	})

	It("keeps the source address towards an excluded CIDR and masquerades the rest", func() {
		contNS, outNS := testutil.NewNS(), testutil.NewNS()
		wireTwoOutsides(hostNS, contNS, outNS)
		m := excluding(bc.new(), exclude())
		Expect(nftest.In(hostNS, func() error { return m.Setup(a, cont) })).To(Succeed())
		Expect(testutil.UDPSource(contNS, outNS, "10.99.0.2")).To(Equal("10.1.0.5"), "excluded: no NAT")
		Expect(testutil.UDPSource(contNS, outNS, "fd00:99::2")).To(Equal("fd00:1::5"), "excluded: no NAT")
		Expect(testutil.UDPSource(contNS, outNS, "10.98.0.2")).To(Equal("10.98.0.1"), "not excluded: masqueraded")
		Expect(testutil.UDPSource(contNS, outNS, "fd00:98::2")).To(Equal("fd00:98::1"), "not excluded: masqueraded")
		Expect(nftest.In(hostNS, func() error { return m.Check(a, cont) })).To(Succeed())

		// Setup without the key (the config changed) replaces the
		// attachment's rules: the exclusion goes, and a Check that wants it
		// names what is missing.
		Expect(nftest.In(hostNS, func() error { return bc.new().Setup(a, cont) })).To(Succeed())
		Expect(testutil.UDPSource(contNS, outNS, "10.99.0.2")).To(Equal("10.99.0.1"))
		err := nftest.In(hostNS, func() error { return m.Check(a, cont) })
		Expect(err).To(MatchError(netfilter.ErrMissing))
		Expect(err.Error()).To(And(ContainSubstring("10.99.0.0/16"), ContainSubstring("fd00:99::/64")))
		Expect(nftest.In(hostNS, func() error { return m.Setup(a, cont) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Check(a, cont) })).To(Succeed())
		Expect(testutil.UDPSource(contNS, outNS, "10.99.0.2")).To(Equal("10.1.0.5"))
	})

	It("is removed with the attachment by Teardown (twice), by GC, and by a backend not told of it", func() {
		empty := func() {
			GinkgoHelper()
			if bc.name == "nftables" {
				Expect(bc.kernel(hostNS)).To(Equal(bc.want(a, nil)), "only the shared table and base chain")
			} else {
				Expect(bc.kernel(hostNS)).To(BeEmpty())
			}
		}
		m := excluding(bc.new(), exclude())
		Expect(nftest.In(hostNS, func() error { return m.Setup(a, cont) })).To(Succeed())
		Expect(bc.kernel(hostNS)).To(And(ContainSubstring("10.99.0.0/16"), ContainSubstring("fd00:99::/64")))
		Expect(nftest.In(hostNS, func() error { return m.Teardown(a) })).To(Succeed())
		empty()
		Expect(nftest.In(hostNS, func() error { return m.Teardown(a) })).To(Succeed())

		Expect(nftest.In(hostNS, func() error { return m.Setup(a, cont) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.GC(a.Network, nil) })).To(Succeed())
		empty()

		// DEL goes through TeardownMasqAll, whose backends know no config
		// (its iptables is PATH's, the nft variant here).
		if bc.name == "iptables-legacy" {
			return
		}
		Expect(nftest.In(hostNS, func() error { return m.Setup(a, cont) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return TeardownMasqAll(a) })).To(Succeed())
		empty()
	})

	It("stays with its attachment when GC keeps it", func() {
		b := netfilter.Owner{Network: a.Network, ContainerID: "ctr-b", IfName: "eth0"}
		m := excluding(bc.new(), exclude())
		Expect(nftest.In(hostNS, func() error { return m.Setup(a, cont) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Setup(b, mustCIDRs("10.1.0.6/24")) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.GC(a.Network, []netfilter.Owner{a}) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Check(a, cont) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Check(b, mustCIDRs("10.1.0.6/24")) })).To(MatchError(netfilter.ErrMissing))
	})

	It("keeps another interface's exclusions when one interface of the container goes", func() {
		eth1 := netfilter.Owner{Network: a.Network, ContainerID: a.ContainerID, IfName: "eth1"}
		m := excluding(bc.new(), exclude())
		Expect(nftest.In(hostNS, func() error { return m.Setup(a, cont) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Setup(eth1, mustCIDRs("10.2.0.5/24")) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Teardown(a) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Check(eth1, mustCIDRs("10.2.0.5/24")) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Check(a, cont) })).To(MatchError(netfilter.ErrMissing))
	})
},
	Entry(nil, iptablesCase("nft")),
	Entry(nil, iptablesCase("legacy")),
	Entry(nil, nftablesCase),
)

var _ = Describe("ipMasqExcludeCIDRs rendered", func() {
	o := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
	_, x, _ := net.ParseCIDR("10.88.0.0/16")

	It("iptables: a marker and an ACCEPT per excluded CIDR, before the MASQUERADE", func() {
		r := desiredIPTables(o, nftnl.IPv4, mustCIDRs("10.88.0.5/24"), x)
		rules := strings.Join(r.rules(), "\n")
		Expect(rules).To(MatchRegexp(`(?s)-s 10\.88\.0\.5/32 -d 10\.88\.0\.0/16 -m comment --comment "name: .* if: 65746830".*` +
			`-d 10\.88\.0\.0/24 .* -j ACCEPT\n-d 10\.88\.0\.0/16 .* -j ACCEPT\n! -d 224\.0\.0\.0/4 .* -j MASQUERADE$`))
		// An IPv4 exclusion says nothing about IPv6.
		Expect(desiredIPTables(o, nftnl.IPv6, mustCIDRs("fd00:1::5/64"), x).rules()).To(HaveLen(3))
		// The iptables-nft encoding covers the exclusions (same layout).
		enc, ok := r.nftRules(nftnl.IPv4)
		Expect(ok).To(BeTrue())
		Expect(enc.own).To(HaveLen(len(r.rules())))
	})

	It("nftables: a return per address and excluded CIDR, before its masquerade", func() {
		rs := renderRules(nftMasqRules(o, mustCIDRs("10.88.0.5/24", "fd00:1::5/64"), x))
		Expect(rs).To(HaveLen(3))
		Expect(rs[0]).To(HavePrefix("ip saddr 10.88.0.5 ip daddr 10.88.0.0/16 return"))
		Expect(rs[1]).To(HavePrefix("ip saddr 10.88.0.5 ip daddr != 10.88.0.0/24 masquerade"))
		Expect(rs[2]).To(HavePrefix("ip6 saddr fd00:1::5 ip6 daddr != fd00:1::/64 masquerade"))
	})
})

var _ = Describe("ipMasqExcludeCIDRs next to upstream's plugins", func() {
	It("is removed with the chain by upstream's DEL (iptables)", func() {
		o := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
		chain, comment := netfilter.IptablesChain(o), netfilter.IptablesComment(o)
		_, x, _ := net.ParseCIDR("10.88.0.0/16")
		hostNS := testutil.NewNS()
		m := excluding(&iptablesMasq{Runner: &iptables.Runner{Variant: "nft"}}, []*net.IPNet{x})
		Expect(nftest.In(hostNS, func() error { return m.Setup(o, mustCIDRs("10.1.0.5/24")) })).To(Succeed())
		Expect(iptablesCase("nft").kernel(hostNS)).To(ContainSubstring("10.88.0.0/16"))
		// upstream's DEL: its jump by exact spec, then flush and delete.
		run := func(args ...string) error {
			out, err := exec.Command("iptables-nft", append([]string{"-w", "-t", "nat"}, args...)...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, out)
			}
			return nil
		}
		Expect(nftest.In(hostNS, func() error {
			return iptablesSteps(
				func() error {
					return run("-D", "POSTROUTING", "-s", "10.1.0.5", "-j", chain, "-m", "comment", "--comment", comment)
				},
				func() error { return run("-F", chain) },
				func() error { return run("-X", chain) },
			)
		})).To(Succeed())
		Expect(iptablesCase("nft").kernel(hostNS)).To(BeEmpty())
	})
})
