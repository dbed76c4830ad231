package masq

import (
	"fmt"
	"os/exec"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/testutil"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
)

// These run the iptables commands upstream's ADD and DEL run (its argument
// order; iptables canonicalises), to show that a node can switch suites with
// attachments in place.
var _ = Describe("iptables backend next to upstream's plugins", func() {
	o := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
	addrs := mustCIDRs("10.1.0.5/24")
	chain := netfilter.IptablesChain(o)
	comment := netfilter.IptablesComment(o)
	runIPTables := func(args ...string) error {
		out, err := exec.Command("iptables-nft", append([]string{"-w", "-t", "nat"}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	upstreamAdd := func() error {
		return iptablesSteps(
			func() error { return runIPTables("-N", chain) },
			func() error {
				return runIPTables("-A", chain, "-d", "10.1.0.5/24", "-j", "ACCEPT", "-m", "comment", "--comment", comment)
			},
			func() error {
				return runIPTables("-A", chain, "!", "-d", "224.0.0.0/4", "-j", "MASQUERADE", "-m", "comment", "--comment", comment)
			},
			func() error {
				return runIPTables("-A", "POSTROUTING", "-s", "10.1.0.5", "-j", chain, "-m", "comment", "--comment", comment)
			},
		)
	}
	upstreamDel := func() error {
		return iptablesSteps(
			func() error {
				return runIPTables("-D", "POSTROUTING", "-s", "10.1.0.5", "-j", chain, "-m", "comment", "--comment", comment)
			},
			func() error { return runIPTables("-F", chain) },
			func() error { return runIPTables("-X", chain) },
		)
	}

	It("checks and tears down what upstream's ADD made", func() {
		hostNS := testutil.NewNS()
		m := &iptablesMasq{Runner: &iptables.Runner{Variant: "nft"}}
		Expect(nftest.In(hostNS, upstreamAdd)).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Check(o, addrs) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Teardown(o) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Check(o, addrs) })).To(MatchError(netfilter.ErrMissing))
		Expect(iptablesCase("nft").kernel(hostNS)).To(BeEmpty())
	})

	It("is removed by upstream's DEL", func() {
		hostNS := testutil.NewNS()
		m := &iptablesMasq{Runner: &iptables.Runner{Variant: "nft"}}
		Expect(nftest.In(hostNS, func() error { return m.Setup(o, addrs) })).To(Succeed())
		Expect(nftest.In(hostNS, upstreamDel)).To(Succeed())
		Expect(iptablesCase("nft").kernel(hostNS)).To(BeEmpty())
	})

	It("is removed by upstream's DEL when Setup wrote it over netlink", func() {
		hostNS := testutil.NewNS()
		other := netfilter.Owner{Network: "net1", ContainerID: "ctr-b", IfName: "eth0"}
		Expect(nftest.In(hostNS, func() error {
			return (&iptablesMasq{Runner: &iptables.Runner{Variant: "nft"}}).Setup(other, mustCIDRs("10.1.0.6/24"))
		})).To(Succeed())
		othersOnly := iptablesCase("nft").kernel(hostNS)
		var calls []string
		m := &iptablesMasq{Runner: &iptables.Runner{Variant: "nft", Run: nftest.CountingRun(&calls)}}
		Expect(nftest.In(hostNS, func() error { return m.Setup(o, addrs) })).To(Succeed())
		Expect(calls).To(BeEmpty(), "written over netlink (setupNFT)")
		Expect(iptablesCase("nft").kernel(hostNS)).To(ContainSubstring(chain))
		Expect(nftest.In(hostNS, upstreamDel)).To(Succeed())
		Expect(iptablesCase("nft").kernel(hostNS)).To(Equal(othersOnly))
	})
})

func iptablesSteps(steps ...func() error) error {
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
	}
	return nil
}
