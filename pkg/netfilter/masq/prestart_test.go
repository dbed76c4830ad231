package masq

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
)

// A prestarted iptables-nft-restore must carry exactly what Setup would
// write with a restore of its own, and, unused, be killed without having
// changed the kernel.
var _ = Describe("iptables-nft restore started before the addresses", func() {
	o := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
	nft := iptablesCase("nft")

	// setupTwins runs Setup(o, addrs) in two fresh namespaces, with a
	// prestarted restore and without one, and returns the backend that
	// had it and the first namespace.
	setupTwins := func(addrs ...string) (*iptablesMasq, *ns.NetNS) {
		GinkgoHelper()
		pre, plain := testutil.NewNS(), testutil.NewNS()
		m := &iptablesMasq{Runner: &iptables.Runner{Variant: "nft"}}
		Expect(nftest.In(pre, func() error { m.Prestart(); return nil })).To(Succeed())
		Expect(m.Prestarted).NotTo(BeNil(), "iptables-nft-restore started")
		Expect(nftest.In(pre, func() error { return m.Setup(o, mustCIDRs(addrs...)) })).To(Succeed())
		Expect(nftest.In(plain, func() error {
			return (&iptablesMasq{Runner: &iptables.Runner{Variant: "nft"}}).Setup(o, mustCIDRs(addrs...))
		})).To(Succeed())
		Expect(nft.kernel(pre)).To(Equal(nft.kernel(plain)))
		Expect(nft.kernel(pre)).To(ContainSubstring(netfilter.IptablesChain(o)))
		return m, pre
	}

	It("feeds Setup's IPv4 rules to the prestarted process", func() {
		m, _ := setupTwins("10.1.0.5/24", "fd00:1::5/64")
		Expect(m.Prestarted).To(BeNil(), "Setup took it")
	})

	It("leaves it to Release when Setup has no IPv4 address, and Release ends it", func() {
		m, n := setupTwins("fd00:1::5/64")
		p := m.Prestarted
		Expect(p).NotTo(BeNil(), "an IPv6 Setup does not take the IPv4 restore")
		before := nft.kernel(n)
		m.Release()
		Expect(p.Proc.Exited()).To(BeTrue(), "the process was reaped")
		Expect(nft.kernel(n)).To(Equal(before))
		m.Release() // twice: nothing left to end
	})

	It("changes nothing when released unused (killed before it read anything)", func() {
		n := testutil.NewNS()
		m := &iptablesMasq{Runner: &iptables.Runner{Variant: "nft"}}
		Expect(nftest.In(n, func() error { m.Prestart(); return nil })).To(Succeed())
		p := m.Prestarted
		Expect(p).NotTo(BeNil())
		m.Release()
		Expect(p.Proc.Exited()).To(BeTrue())
		Expect(testutil.NetfilterOutput(n, "nft", "list", "ruleset")).To(BeEmpty())
	})

	It("is what the default backend prestarts, and its Setup takes it", func() {
		n := testutil.NewNS()
		var m netfilter.Masq
		Expect(nftest.In(n, func() (err error) { m, err = NewMasq(""); return })).To(Succeed())
		auto, ok := m.(*autoMasq)
		Expect(ok).To(BeTrue(), "with iptables usable (.ci/run installs it), the default is iptables falling back to nftables")
		auto.ipt.Variant = "nft"
		Expect(nftest.In(n, func() error { m.(netfilter.Prestarter).Prestart(); return nil })).To(Succeed())
		Expect(auto.ipt.Prestarted).NotTo(BeNil())
		Expect(nftest.In(n, func() error { return m.Setup(o, mustCIDRs("10.1.0.5/24")) })).To(Succeed())
		Expect(auto.ipt.Prestarted).To(BeNil(), "Setup took it")
		Expect(nft.kernel(n)).To(ContainSubstring(netfilter.IptablesChain(o)))
		m.(netfilter.Prestarter).Release()
	})

	It("starts nothing for legacy iptables, whose restore may lock before it reads", func() {
		m := &iptablesMasq{Runner: &iptables.Runner{Variant: "legacy"}}
		Expect(nftest.In(testutil.NewNS(), func() error { m.Prestart(); return nil })).To(Succeed())
		Expect(m.Prestarted).To(BeNil())
	})
})
