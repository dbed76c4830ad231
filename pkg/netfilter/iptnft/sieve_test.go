package iptnft

import (
	"bytes"
	"fmt"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
	"github.com/cniforge/plugins/pkg/ns"

	"github.com/google/nftables"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/testutil"
)

var _ = Describe("rulesWith", func() {
	It("gives the rules holding a needle as GetRules decodes them, in order, and no others", func() {
		n := testutil.NewNS()
		testutil.NetfilterOutput(n, "iptables-nft", "-w", "-t", "nat", "-N", "CNI-A")
		testutil.NetfilterOutput(n, "iptables-nft", "-w", "-t", "nat", "-N", "CNI-B")
		for i := range 6 {
			chain := []string{"CNI-A", "CNI-B"}[i%2]
			testutil.NetfilterOutput(n, "iptables-nft", "-w", "-t", "nat", "-A", "POSTROUTING",
				"-s", fmt.Sprintf("10.1.0.%d", i+1), "-m", "comment", "--comment", fmt.Sprintf("pod %d", i), "-j", chain)
		}
		table := &nftables.Table{Name: "nat", Family: nftables.TableFamilyIPv4}
		var all, some, none []*nftables.Rule
		Expect(in(n, func() error {
			return nftnl.WithNFT(func(c *nftnl.NftConn) (err error) {
				if all, err = c.GetRules(table, &nftables.Chain{Name: "POSTROUTING"}); err != nil {
					return err
				}
				if some, err = nftnl.RulesWith(c, table, "POSTROUTING", []byte("CNI-B"), nil); err != nil {
					return err
				}
				none, err = nftnl.RulesWith(c, table, "POSTROUTING", []byte("CNI-C"))
				return err
			})
		})).To(Succeed())
		Expect(all).To(HaveLen(6))
		Expect(none).To(BeEmpty())
		Expect(some).To(HaveLen(3))
		for i, r := range some {
			want := all[2*i+1]
			Expect(r.Handle).To(Equal(want.Handle))
			Expect(r.Chain.Name).To(Equal("POSTROUTING"))
			Expect(SameExprs(nftnl.IPv4, r.Exprs, want.Exprs)).To(BeTrue(), "rule %d", i)
			spec, ok := IptSaveSpec(nftnl.IPv4, r.Exprs)
			Expect(ok).To(BeTrue())
			Expect(spec).To(HaveSuffix(fmt.Sprintf(`--comment "pod %d" -j CNI-B`, 2*i+1)))
		}
		Expect(bytes.Equal(some[0].UserData, all[1].UserData)).To(BeTrue())
	})

	It("answers as GetRules does on a chain that is not there", func() {
		n := testutil.NewNS()
		testutil.NetfilterOutput(n, "iptables-nft", "-w", "-t", "nat", "-N", "CNI-A")
		for _, t := range []string{"nat", "mangle"} {
			table := &nftables.Table{Name: t, Family: nftables.TableFamilyIPv4}
			var got, want []*nftables.Rule
			var err, wantErr error
			Expect(in(n, func() error {
				return nftnl.WithNFT(func(c *nftnl.NftConn) error {
					want, wantErr = c.GetRules(table, &nftables.Chain{Name: "CNI-NONE"})
					got, err = nftnl.RulesWith(c, table, "CNI-NONE", []byte("x"))
					return nil
				})
			})).To(Succeed())
			Expect(got).To(BeEmpty(), t)
			Expect(want).To(BeEmpty(), t)
			Expect(err != nil).To(Equal(wantErr != nil), "%s: %v, GetRules: %v", t, err, wantErr)
		}
	})
})

func in(n *ns.NetNS, fn func() error) error { return n.Do(fn) }
