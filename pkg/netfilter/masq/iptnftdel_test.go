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
)

// The netlink teardown of iptables-nft rules must leave the nat table
// exactly as the iptables-save + iptables-restore path does, and take
// that path whenever the chain does not go as a whole.
var _ = Describe("iptables-nft teardown over netlink", func() {
	eth0 := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
	eth1 := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth1"}
	other := netfilter.Owner{Network: "net1", ContainerID: "ctr-b", IfName: "eth0"}

	restoreText := func(n *ns.NetNS, tool, text string) {
		GinkgoHelper()
		Expect(nftest.In(n, func() error {
			cmd := exec.Command(tool, "--noflush")
			cmd.Stdin = strings.NewReader(text)
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
			return nil
		})).To(Succeed())
	}
	// upstream writes what upstream's bridge ADD leaves for o (no
	// markers), as iptables-save prints it.
	upstream := func(n *ns.NetNS, o netfilter.Owner, ip, subnet string) {
		GinkgoHelper()
		chain, c := netfilter.IptablesChain(o), iptables.SaveQuote(netfilter.IptablesComment(o))
		restoreText(n, "iptables-nft-restore", fmt.Sprintf("*nat\n:%[1]s - [0:0]\n"+
			"-A POSTROUTING -s %[3]s/32 -m comment --comment %[2]s -j %[1]s\n"+
			"-A %[1]s -d %[4]s -m comment --comment %[2]s -j ACCEPT\n"+
			"-A %[1]s ! -d 224.0.0.0/4 -m comment --comment %[2]s -j MASQUERADE\nCOMMIT\n", chain, c, ip, subnet))
	}
	setup := func(n *ns.NetNS, o netfilter.Owner, cidrs ...string) {
		GinkgoHelper()
		m := &iptablesMasq{Runner: &iptables.Runner{Variant: "nft"}}
		Expect(nftest.In(n, func() error { return m.Setup(o, mustCIDRs(cidrs...)) })).To(Succeed())
	}

	// teardown runs Teardown(o) on the node prepare makes, once with the
	// netlink path and once without it, each on a namespace of its own,
	// and returns the processes the netlink run started. The two nat
	// tables must end up the same.
	teardown := func(o netfilter.Owner, prepare func(n *ns.NetNS)) []string {
		GinkgoHelper()
		fast, slow := testutil.NewNS(), testutil.NewNS()
		prepare(fast)
		prepare(slow)
		before := iptablesCase("nft").kernel(fast)
		Expect(before).To(ContainSubstring(netfilter.IptablesChain(o)), "the node holds o's chain before the teardown")
		var calls []string
		m := &iptablesMasq{Runner: &iptables.Runner{Variant: "nft", Run: nftest.CountingRun(&calls)}}
		Expect(nftest.In(fast, func() error { return m.Teardown(o) })).To(Succeed())
		Expect(nftest.In(slow, func() error {
			return (&iptablesMasq{Runner: &iptables.Runner{Variant: "nft", NoNFT: true}}).Teardown(o)
		})).To(Succeed())
		Expect(iptablesCase("nft").kernel(fast)).To(Equal(iptablesCase("nft").kernel(slow)))
		return calls
	}

	It("deletes an attachment's chain and jumps, IPv4 and IPv6, with no process", func() {
		calls := teardown(eth0, func(n *ns.NetNS) {
			setup(n, eth0, "10.1.0.5/24", "fd00:1::5/64")
			setup(n, other, "10.1.0.6/24", "fd00:1::6/64")
		})
		Expect(calls).To(BeEmpty())
	})

	It("deletes the chain upstream's ADD made (no markers), with no process", func() {
		var nat string
		calls := teardown(eth0, func(n *ns.NetNS) {
			upstream(n, eth0, "10.1.0.5", "10.1.0.0/24")
			upstream(n, other, "10.1.0.6", "10.1.0.0/24")
			nat = iptablesCase("nft").kernel(n)
		})
		Expect(calls).To(BeEmpty())
		Expect(nat).To(ContainSubstring(netfilter.IptablesChain(other)))
	})

	It("leaves a chain another interface of the container still uses to iptables-save", func() {
		calls := teardown(eth0, func(n *ns.NetNS) {
			setup(n, eth0, "10.1.0.5/24")
			setup(n, eth1, "10.2.0.5/24")
		})
		Expect(calls).To(Equal([]string{"iptables-nft-save", "iptables-nft-restore"}))
	})

	It("leaves a chain with a jump no marker accounts for to iptables-save", func() {
		calls := teardown(eth0, func(n *ns.NetNS) {
			setup(n, eth0, "10.1.0.5/24")
			restoreText(n, "iptables-nft-restore", fmt.Sprintf("*nat\n-A POSTROUTING -s 10.9.0.9/32 -m comment --comment %s -j %s\nCOMMIT\n",
				iptables.SaveQuote(netfilter.IptablesComment(eth0)), netfilter.IptablesChain(eth0)))
		})
		Expect(calls).To(Equal([]string{"iptables-nft-save", "iptables-nft-restore"}))
	})
})
