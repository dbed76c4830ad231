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
		out := map[string][]string{}
		for _, tool := range []string{"iptables-nft", "ip6tables-nft"} {
			for _, l := range strings.Split(testutil.NetfilterOutput(n, tool+"-save", "-t", "filter"), "\n") {
				if strings.HasPrefix(l, "-A ") && strings.Contains(l, "CNI") && !strings.Contains(l, `ctr-b`) &&
					!strings.Contains(l, "10.1.0.6/") && !strings.Contains(l, "fd00:1::6/") {
					out[tool] = append(out[tool], l)
				}
			}
		}
		return out
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
			return (&iptablesForward{ipt: &iptables.Runner{Variant: "nft", Run: nftest.CountingRun(&calls)}}).Check(r)
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
		want := nftest.In(n, func() error { return fw(&iptables.Runner{Variant: "nft", NoNFT: true}).Check(r) })
		Expect(want).To(MatchError(netfilter.ErrMissing))
		var calls []string
		err := nftest.In(n, func() error { return fw(&iptables.Runner{Variant: "nft", Run: nftest.CountingRun(&calls)}).Check(r) })
		Expect(err).To(MatchError(want.Error()))
	})
})
