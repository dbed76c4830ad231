package ipt

import (
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/netfilter/hostport/internal/pmtest"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

// check --repair runs portmap's ADD again on a live attachment (issue 29):
// on iptables, the rules of its CNI-DN chain that are there stay (same
// handles on iptables-nft), the missing ones are inserted where they
// belong, and the chain ends as a fresh ADD makes it.
var _ = Describe("iptables portmap Setup over a live attachment", func() {
	It("inserts the missing rules in place and touches the others", func() {
		n := testutil.NewNS()
		a := pmtest.PortMapOpts("ctr-a", true, pmtest.ManyMappings(3, 31000), "10.9.0.6")
		p := &iptablesPortMap{m: &iptables.Runner{Variant: "nft"}}
		Expect(nftest.In(n, func() error { return p.Setup(a) })).To(Succeed())
		chain := pmChain(a.Owner)
		save := func(n *ns.NetNS) []string {
			GinkgoHelper()
			var out []string
			for _, l := range strings.Split(testutil.NetfilterOutput(n, "iptables-nft-save", "-t", "nat"), "\n") {
				if strings.HasPrefix(l, "-A ") && strings.Contains(l, chain) {
					out = append(out, l)
				}
			}
			return out
		}
		handles := func() map[string]string { // rule text (no handle) -> handle
			GinkgoHelper()
			out := map[string]string{}
			re := regexp.MustCompile(`^(.*) # handle (\d+)$`)
			for _, l := range strings.Split(testutil.NetfilterOutput(n, "nft", "-a", "list", "chain", "ip", "nat", chain), "\n") {
				if m := re.FindStringSubmatch(strings.TrimSpace(l)); m != nil && !strings.HasPrefix(m[1], "chain ") {
					out[m[1]] = m[2]
				}
			}
			return out
		}
		want := save(n)
		before := handles()
		Expect(len(before)).To(Equal(3*3), "three rules per mapping (hairpin, localhost, DNAT)")

		// The second mapping's hairpin mark and the last DNAT go missing.
		var deleted int
		for _, l := range want {
			if strings.HasPrefix(l, "-A "+chain+" -s 10.9.0.0/24 ") && strings.Contains(l, "--dport 31001 ") ||
				strings.HasPrefix(l, "-A "+chain+" ") && strings.Contains(l, "--dport 31002 ") && strings.Contains(l, "-j DNAT") {
				testutil.NetfilterOutput(n, append([]string{"iptables-nft", "-t", "nat", "-D"}, nftest.ShellFields(strings.TrimPrefix(l, "-A "))...)...)
				deleted++
			}
		}
		Expect(deleted).To(Equal(2))
		kept := handles()
		Expect(nftest.In(n, func() error { return p.Check(a) })).NotTo(Succeed())

		Expect(nftest.In(n, func() error { return p.Setup(a) })).To(Succeed())
		Expect(save(n)).To(Equal(want), "the chain as a fresh ADD makes it")
		after := handles()
		for rule, h := range kept {
			Expect(after).To(HaveKeyWithValue(rule, h), "a rule that was there keeps its handle")
		}
		Expect(nftest.In(n, func() error { return p.Check(a) })).To(Succeed())
	})
})
