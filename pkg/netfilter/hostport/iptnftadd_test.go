package hostport

import (
	"net"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"

	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
)

// On iptables-nft, a portmap Setup that finds the shared chains in place
// and its own chain absent writes that chain and its entries over netlink
// (setupNFT). Whatever reads them (iptables-save, iptables -C and -D, nft)
// must not be able to tell them from iptables-restore's.
var _ = Describe("iptables-nft port forwards written over netlink", func() {
	opts := portMapOpts
	pm := func(m *iptables.Runner) *iptablesPortMap { return &iptablesPortMap{m: m} }

	// seeded returns a namespace whose nat (and raw) tables hold another
	// attachment's forwards, made by iptables-restore, with snat as given.
	seeded := func(snat bool) *ns.NetNS {
		GinkgoHelper()
		n := testutil.NewNS()
		seed := opts("ctr-seed", snat, manyMappings(2, 30000), "10.9.0.5", "fd00:9::5")
		Expect(nftest.In(n, func() error { return pm(&iptables.Runner{Variant: "nft", NoNFT: true}).Setup(seed) })).To(Succeed())
		return n
	}

	listings := func(n *ns.NetNS) string { GinkgoHelper(); return nftest.NftListings(n) }

	DescribeTable("writes exactly what iptables-restore writes, with no process",
		func(snat bool, mappings []PortMapping, ips ...string) {
			a := opts("ctr-a", snat, mappings, ips...)
			viaRestore, viaNetlink := seeded(snat), seeded(snat)
			Expect(nftest.In(viaRestore, func() error { return pm(&iptables.Runner{Variant: "nft", NoNFT: true}).Setup(a) })).To(Succeed())
			var calls []string
			Expect(nftest.In(viaNetlink, func() error { return pm(&iptables.Runner{Variant: "nft", Run: nftest.CountingRun(&calls)}).Setup(a) })).To(Succeed())
			Expect(calls).To(BeEmpty(), "no iptables process")
			Expect(listings(viaNetlink)).To(Equal(listings(viaRestore)))
			chain := pmChain(a.Owner)
			Expect(listings(viaNetlink)).To(ContainSubstring(chain))

			// iptables finds every rule by its spec, as upstream's DEL
			// deletes the entries.
			for _, tool := range []string{"iptables-nft", "ip6tables-nft"} {
				for _, l := range strings.Split(testutil.NetfilterOutput(viaNetlink, tool+"-save", "-t", "nat"), "\n") {
					if !strings.HasPrefix(l, "-A ") || !strings.Contains(l, chain) {
						continue
					}
					spec := append([]string{tool, "-t", "nat", "-C"}, nftest.ShellFields(strings.TrimPrefix(l, "-A "))...)
					testutil.NetfilterOutput(viaNetlink, spec...)
				}
			}
			calls = nil
			Expect(nftest.In(viaNetlink, func() error { return pm(&iptables.Runner{Variant: "nft", Run: nftest.CountingRun(&calls)}).Check(a) })).To(Succeed())
			Expect(calls).To(BeEmpty(), "Check finds every rule over netlink")
			for _, n := range []*ns.NetNS{viaNetlink, viaRestore} {
				Expect(nftest.In(n, func() error { _, err := pm(&iptables.Runner{Variant: "nft"}).Teardown(a.Owner); return err })).To(Succeed())
			}
			Expect(listings(viaNetlink)).NotTo(ContainSubstring(chain))
			Expect(listings(viaNetlink)).To(Equal(listings(viaRestore)))
		},
		Entry("snat, one tcp mapping, IPv4 (Kubernetes' hostPort)", true,
			[]PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}}, "10.1.0.5"),
		Entry("snat, dual stack, tcp and udp, one with a host IP", true,
			[]PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}, {HostPort: 5353, ContainerPort: 53, Protocol: "udp"},
				{HostPort: 8443, ContainerPort: 443, Protocol: "tcp", HostIP: net.ParseIP("192.168.1.1")}}, "10.1.0.5", "fd00:1::5"),
		Entry("no snat, 20 ports (two entries)", false, manyMappings(20, 20000), "10.1.0.5"),
	)

	It("leaves a first Setup, which makes the shared chains, to iptables-restore", func() {
		var calls []string
		n := testutil.NewNS()
		a := opts("ctr-a", true, []PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}}, "10.1.0.5")
		Expect(nftest.In(n, func() error { return pm(&iptables.Runner{Variant: "nft", Run: nftest.CountingRun(&calls)}).Setup(a) })).To(Succeed())
		Expect(calls).To(ContainElement("iptables-nft-restore"))
	})

	It("leaves a repeated Setup, whose chain exists, to iptables-save and changes nothing", func() {
		n := seeded(true)
		a := opts("ctr-a", true, []PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}}, "10.1.0.5")
		Expect(nftest.In(n, func() error { return pm(&iptables.Runner{Variant: "nft"}).Setup(a) })).To(Succeed())
		before := listings(n)
		var calls []string
		Expect(nftest.In(n, func() error { return pm(&iptables.Runner{Variant: "nft", Run: nftest.CountingRun(&calls)}).Setup(a) })).To(Succeed())
		Expect(calls).To(ContainElement("iptables-nft-save"))
		Expect(listings(n)).To(Equal(before), "no rule twice")
	})
})
