package forward

import (
	"fmt"
	"net"
	"os/exec"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
)

// And for the firewall: o's rules in CNI-FORWARD (its marker comment) go
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
