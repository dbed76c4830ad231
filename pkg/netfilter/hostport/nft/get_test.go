package nft

import (
	"net"

	"github.com/google/nftables"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/testutil"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/hostport"
	"github.com/cniforge/plugins/pkg/netfilter/hostport/internal/pmtest"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

var _ = Describe("nftables teardown by key (DEL with its mappings)", func() {
	It("finds its own elements by lookup and leaves others', even under the same key", func() {
		hostNS := testutil.NewNS()
		mine := hostport.PortMapOptions{Owner: netfilter.Owner{Network: "n", ContainerID: "mine"}, ContainerIPs: []net.IPNet{{IP: net.ParseIP("10.1.0.5")}},
			SNAT: true, MasqAll: true, Mappings: []hostport.PortMapping{
				{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"},
				{HostPort: 8443, ContainerPort: 443, Protocol: "tcp", HostIP: net.ParseIP("127.0.0.1")},
			}}
		other := hostport.PortMapOptions{Owner: netfilter.Owner{Network: "n", ContainerID: "other"}, ContainerIPs: []net.IPNet{{IP: net.ParseIP("10.1.0.6")}},
			SNAT: true, Mappings: pmtest.ManyMappings(50, 30000)}
		Expect(hostNS.Do(func() error {
			defer GinkgoRecover()
			p := newNFTablesPortMap()
			Expect(p.Setup(other)).To(Succeed())
			Expect(p.Setup(mine)).To(Succeed())

			c, err := p.conn()
			Expect(err).NotTo(HaveOccurred())
			defer c.CloseLasting()
			// A DEL naming one of other's ports as well finds it, but it is
			// not ours: untouched.
			ms := append(mine.Mappings, other.Mappings[0])
			ips, changed, ok, err := p.teardownByKey(c, mine.Owner, ms)
			Expect(err).NotTo(HaveOccurred())
			Expect(ok).To(BeTrue(), "lookups used, no dump")
			Expect(changed).To(BeTrue())
			Expect(ips).To(HaveLen(1))
			Expect(ips[0].String()).To(Equal("10.1.0.5"))
			Expect(c.Flush()).To(Succeed())

			for set, want := range map[string]int{pmPortsMap: 50, pmHostIPMap: 0, pmHairpin: 0, pmMasqAll: 0, pmHairpinNets: 1} {
				els, err := c.GetSetElements(&nftables.Set{Table: pmTableOf(nftnl.IPv4), Name: set})
				Expect(err).NotTo(HaveOccurred())
				Expect(els).To(HaveLen(want), set)
			}
			Expect(p.Check(other)).To(Succeed(), "another attachment's mappings stay")
			Expect(p.Check(mine)).To(MatchError(hostport.ErrPortMapMissing))

			// Nothing left of ours: a second teardown changes nothing.
			_, changed, ok, err = p.teardownByKey(c, mine.Owner, mine.Mappings)
			Expect(err).NotTo(HaveOccurred())
			Expect(ok).To(BeTrue())
			Expect(changed).To(BeFalse())
			return nil
		})).To(Succeed())
	})

	It("falls back to reading the maps with no or too many mappings", func() {
		hostNS := testutil.NewNS()
		Expect(hostNS.Do(func() error {
			defer GinkgoRecover()
			p := newNFTablesPortMap()
			c, err := p.conn()
			Expect(err).NotTo(HaveOccurred())
			defer c.CloseLasting()
			for _, ms := range [][]hostport.PortMapping{nil, pmtest.ManyMappings(pmLookupMax+1, 20000)} {
				_, _, ok, err := p.teardownByKey(c, netfilter.Owner{Network: "n", ContainerID: "c"}, ms)
				Expect(err).NotTo(HaveOccurred())
				Expect(ok).To(BeFalse())
			}
			return nil
		})).To(Succeed())
	})
})
