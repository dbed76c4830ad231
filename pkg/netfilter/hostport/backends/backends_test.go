package backends

import (
	"net"

	"github.com/google/nftables"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/hostport"
	"github.com/cniforge/plugins/pkg/netfilter/hostport/internal/pmtest"
	"github.com/cniforge/plugins/pkg/testutil"
)

var _ = DescribeTable("1000 port mappings of one attachment",
	func(backend string) {
		hostNS := testutil.NewNS()
		opts := hostport.PortMapOptions{Owner: netfilter.Owner{Network: "n", ContainerID: "c"}, ContainerIPs: []net.IPNet{{IP: net.ParseIP("10.1.0.5")}},
			SNAT: true, MarkMasqBit: hostport.DefaultMarkMasqBit, Mappings: pmtest.ManyMappings(1000, 20000)}
		other := opts
		other.Owner.ContainerID = "other"
		other.Mappings = pmtest.ManyMappings(3, 40000)
		other.ContainerIPs = []net.IPNet{{IP: net.ParseIP("10.1.0.6")}}
		Expect(hostNS.Do(func() error {
			defer GinkgoRecover()
			pm, err := NewPortMap(backend)
			Expect(err).NotTo(HaveOccurred())
			Expect(pm.Setup(other)).To(Succeed())
			Expect(pm.Setup(opts)).To(Succeed())
			Expect(pm.Check(opts)).To(Succeed())
			if backend == netfilter.BackendNFTables {
				// every mapping is an element, none was cut off
				c, err := nftables.New()
				Expect(err).NotTo(HaveOccurred())
				els, err := c.GetSetElements(&nftables.Set{Table: &nftables.Table{Name: "cni_hostport", Family: nftables.TableFamilyIPv4}, Name: "hostports_map"})
				Expect(err).NotTo(HaveOccurred())
				Expect(els).To(HaveLen(1003))
			}
			ips, err := pm.Teardown(opts.Owner)
			Expect(err).NotTo(HaveOccurred())
			Expect(ips).To(HaveLen(1))
			Expect(ips[0].String()).To(Equal("10.1.0.5"))
			Expect(pm.Check(opts)).To(MatchError(hostport.ErrPortMapMissing))
			Expect(pm.Check(other)).To(Succeed(), "another attachment's mappings stay")
			return nil
		})).To(Succeed())
	},
	Entry("iptables", netfilter.BackendIPTables),
	Entry("nftables", netfilter.BackendNFTables),
)

var _ = Describe("nftables teardown by key (DEL with its mappings)", func() {
	It("tears down through TeardownPortMapAllOf with the table absent", func() {
		hostNS := testutil.NewNS()
		Expect(hostNS.Do(func() error {
			defer GinkgoRecover()
			ips, err := TeardownPortMapAllOf(netfilter.Owner{Network: "n", ContainerID: "c"}, pmtest.ManyMappings(2, 20000))
			Expect(err).NotTo(HaveOccurred())
			Expect(ips).To(BeEmpty())
			return nil
		})).To(Succeed())
	})
})
