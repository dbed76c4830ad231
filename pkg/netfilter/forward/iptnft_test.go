package forward

import (
	"fmt"
	"net"
	"os/exec"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
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
			return fw(nftest.ViaRestore()).Setup(rules(seed, "10.9.0.5", "fd00:9::5"))
		})).To(Succeed())
		return n
	}

	listings := func(n *ns.NetNS) string { GinkgoHelper(); return nftest.NftListings(n, "-t", "filter") }

	DescribeTable("writes exactly what iptables-restore writes, with no process",
		func(addrs ...string) {
			r := rules(o, addrs...)
			viaRestore, viaNetlink := seeded(), seeded()
			Expect(nftest.In(viaRestore, func() error { return fw(nftest.ViaRestore()).Setup(r) })).To(Succeed())
			var calls []string
			Expect(nftest.In(viaNetlink, func() error { return fw(nftest.Counting(&calls)).Setup(r) })).To(Succeed())
			Expect(calls).To(BeEmpty(), "no iptables process")
			Expect(listings(viaNetlink)).To(Equal(listings(viaRestore)))
			Expect(listings(viaNetlink)).To(ContainSubstring(`id: \"ctr-a\"`))

			// iptables finds every rule by its spec, as upstream's DEL
			// and iptables -D do.
			nftest.CheckEachBySpec(viaNetlink, "filter", func(l string) bool { return strings.Contains(l, `id: \"ctr-a\"`) })
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
			return fw(nftest.Counting(&calls)).Setup(rules(o, "10.1.0.5"))
		})).To(Succeed())
		Expect(calls).To(ContainElement("iptables-nft-restore"))
	})

	It("leaves a repeated Setup, whose rules exist, to iptables-save and finds nothing to add", func() {
		n := seeded()
		r := rules(o, "10.1.0.5")
		Expect(nftest.In(n, func() error { return fw(&iptables.Runner{Variant: "nft"}).Setup(r) })).To(Succeed())
		before := listings(n)
		var calls []string
		Expect(nftest.In(n, func() error { return fw(nftest.Counting(&calls)).Setup(r) })).To(Succeed())
		Expect(calls).To(Equal([]string{"iptables-nft-save"}))
		Expect(listings(n)).To(Equal(before), "no rule twice")
	})

	It("leaves the isolation policies to iptables-restore", func() {
		n := seeded()
		r := rules(o, "10.1.0.5")
		r.Policy, r.Bridge = IngressIsolated, "cni0"
		var calls []string
		Expect(nftest.In(n, func() error { return fw(nftest.Counting(&calls)).Setup(r) })).To(Succeed())
		Expect(calls).To(ContainElement("iptables-nft-restore"))
		Expect(nftest.In(n, func() error { return fw(&iptables.Runner{Variant: "nft"}).Check(r) })).To(Succeed())
	})
})

// On iptables-nft, the firewall's Check reads its chains over netlink
// (checkNFT) and starts iptables-save only when something is missing or
// encoded otherwise. It must accept exactly what the iptables-save path
// accepts: our rules (written by iptables-restore) and upstream's.
var _ = Describe("iptables-nft forward Check over netlink", func() {
	o := netfilter.Owner{Network: "fw", ContainerID: "ctr-a", IfName: "eth0"}
	other := netfilter.Owner{Network: "fw", ContainerID: "ctr-b", IfName: "eth0"}

	// cniRules lists n's filter-table rules of the CNI chains and the
	// jumps to them, per tool, but not the other attachment's.
	cniRules := func(n *ns.NetNS) map[string][]string {
		GinkgoHelper()
		return nftest.SavedRules(n, "filter", func(l string) bool {
			return strings.Contains(l, "CNI") && !strings.Contains(l, `ctr-b`) &&
				!strings.Contains(l, "10.1.0.6/") && !strings.Contains(l, "fd00:1::6/")
		})
	}

	DescribeTable("agrees with iptables-save, rule by rule",
		func(policy IngressPolicy, addrs ...string) {
			n := testutil.NewNS()
			r := ForwardRules{Owner: o, Policy: policy, Bridge: "cni0"}
			for _, a := range addrs {
				r.Addrs = append(r.Addrs, net.ParseIP(a))
			}
			fw := func(m *iptables.Runner) *iptablesForward { return &iptablesForward{ipt: m} }
			setup := fw(&iptables.Runner{Variant: "nft"})
			o2 := r
			o2.Owner, o2.Addrs = other, []net.IP{net.ParseIP("10.1.0.6"), net.ParseIP("fd00:1::6")}
			Expect(nftest.In(n, func() error { return setup.Setup(o2) })).To(Succeed())
			Expect(nftest.In(n, func() error { return setup.Setup(r) })).To(Succeed())
			nftest.DeleteEach(n, "filter", cniRules(n), func(m *iptables.Runner) error { return fw(m).Check(r) })
		},
		Entry("open, IPv4", IngressOpen, "10.1.0.5"),
		Entry("same-bridge, dual stack", IngressSameBridge, "10.1.0.5", "fd00:1::5"),
		Entry("isolated, IPv6", IngressIsolated, "fd00:1::5"),
	)

	It("agrees with iptables-save on upstream's uncommented rules", func() {
		n := testutil.NewNS()
		for _, args := range [][]string{
			{"-N", "CNI-FORWARD"},
			{"-N", "CNI-ADMIN"},
			{"-I", "FORWARD", "1", "-m", "comment", "--comment", "CNI firewall plugin rules", "-j", "CNI-FORWARD"},
			{"-A", "CNI-FORWARD", "-m", "comment", "--comment", "CNI firewall plugin admin overrides", "-j", "CNI-ADMIN"},
			{"-A", "CNI-FORWARD", "-d", "10.1.0.5/32", "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT"},
			{"-A", "CNI-FORWARD", "-s", "10.1.0.5/32", "-j", "ACCEPT"},
		} {
			testutil.NetfilterOutput(n, append([]string{"iptables-nft", "-w"}, args...)...)
		}
		r := ForwardRules{Owner: o, Policy: IngressOpen, Addrs: []net.IP{net.ParseIP("10.1.0.5")}}
		nftest.DeleteEach(n, "filter", cniRules(n), func(m *iptables.Runner) error { return (&iptablesForward{ipt: m}).Check(r) })
	})

	It("asks iptables-save when the isolation jump may come after the CNI-FORWARD jump", func() {
		n := testutil.NewNS()
		r := ForwardRules{Owner: o, Policy: IngressSameBridge, Bridge: "cni0", Addrs: []net.IP{net.ParseIP("10.1.0.5")}}
		Expect(nftest.In(n, func() error { return (&iptablesForward{ipt: &iptables.Runner{Variant: "nft"}}).Setup(r) })).To(Succeed())
		// A second jump to CNI-FORWARD, with another comment, ahead of all.
		testutil.NetfilterOutput(n, "iptables-nft", "-I", "FORWARD", "1", "-m", "comment", "--comment", "x", "-j", "CNI-FORWARD")
		var calls []string
		Expect(nftest.In(n, func() error {
			return (&iptablesForward{ipt: nftest.Counting(&calls)}).Check(r)
		})).To(Succeed())
		Expect(calls).To(Equal([]string{"iptables-nft-save"}))
	})

	// checkNFT decodes of CNI-FORWARD only the rules holding one of the
	// attachment's addresses, and the first: the admin jump must be it.
	It("fails, as iptables-save does, when another attachment's rule is ahead of the admin jump", func() {
		n := testutil.NewNS()
		r := ForwardRules{Owner: o, Policy: IngressOpen, Addrs: []net.IP{net.ParseIP("10.1.0.5")}}
		fw := func(m *iptables.Runner) *iptablesForward { return &iptablesForward{ipt: m} }
		Expect(nftest.In(n, func() error { return fw(&iptables.Runner{Variant: "nft"}).Setup(r) })).To(Succeed())
		testutil.NetfilterOutput(n, "iptables-nft", "-w", "-I", "CNI-FORWARD", "1", "-s", "10.1.0.6/32", "-j", "ACCEPT")
		want := nftest.In(n, func() error { return fw(nftest.ViaRestore()).Check(r) })
		Expect(want).To(MatchError(netfilter.ErrMissing))
		var calls []string
		err := nftest.In(n, func() error { return fw(nftest.Counting(&calls)).Check(r) })
		Expect(err).To(MatchError(want.Error()))
	})
})

// Teardown: o's rules in CNI-FORWARD (its marker comment) go
// over netlink; upstream's uncommented rules for its address send it to
// iptables-save, which knows their exact spec.
var _ = Describe("iptables-nft firewall teardown over netlink", func() {
	rules := func(id string, ips ...string) ForwardRules {
		r := ForwardRules{Owner: netfilter.Owner{Network: "n", ContainerID: id, IfName: "eth0"}}
		for _, ip := range ips {
			r.Addrs = append(r.Addrs, net.ParseIP(ip))
		}
		return r
	}
	a, b := rules("ctr-a", "10.1.0.5", "fd00:1::5"), rules("ctr-b", "10.1.0.6", "fd00:1::6")

	teardown := func(prepare func(n *ns.NetNS)) []string {
		GinkgoHelper()
		fast, slow := testutil.NewNS(), testutil.NewNS()
		for _, n := range []*ns.NetNS{fast, slow} {
			for _, r := range []ForwardRules{a, b} {
				Expect(nftest.In(n, func() error { return newIPTablesForward().Setup(r) })).To(Succeed())
			}
			prepare(n)
		}
		var calls []string
		m := newIPTablesForward()
		m.ipt.Variant = "nft"
		m.ipt.Run = nftest.CountingRun(&calls)
		Expect(nftest.In(fast, func() error { return m.Teardown(a.Owner, a.Addrs) })).To(Succeed())
		old := newIPTablesForward()
		old.ipt.Variant, old.ipt.NoNFT = "nft", true
		Expect(nftest.In(slow, func() error { return old.Teardown(a.Owner, a.Addrs) })).To(Succeed())
		for _, save := range []string{"iptables-nft-save", "ip6tables-nft-save"} {
			filter := testutil.NetfilterOutput(fast, save, "-t", "filter")
			Expect(filter).To(Equal(testutil.NetfilterOutput(slow, save, "-t", "filter")), save)
			Expect(filter).NotTo(ContainSubstring(`id: \"ctr-a\"`))
			Expect(filter).To(ContainSubstring(`id: \"ctr-b\"`), "the other attachment's rules stay")
		}
		return calls
	}

	It("deletes an attachment's rules, IPv4 and IPv6, with no process", func() {
		Expect(teardown(func(*ns.NetNS) {})).To(BeEmpty())
	})

	It("leaves upstream's uncommented rules for the address to iptables-save", func() {
		calls := teardown(func(n *ns.NetNS) {
			restoreText := fmt.Sprintf("*filter\n-A %s -d 10.1.0.5/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n-A %s -s 10.1.0.5/32 -j ACCEPT\nCOMMIT\n", fwdChain, fwdChain)
			Expect(nftest.In(n, func() error {
				cmd := exec.Command("iptables-nft-restore", "--noflush")
				cmd.Stdin = strings.NewReader(restoreText)
				if out, err := cmd.CombinedOutput(); err != nil {
					return fmt.Errorf("%w: %s", err, out)
				}
				return nil
			})).To(Succeed())
		})
		Expect(calls).To(Equal([]string{"iptables-nft-save", "iptables-nft-restore"}))
	})
})
