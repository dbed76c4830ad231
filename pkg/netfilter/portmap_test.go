package netfilter

import (
	"net"

	"github.com/google/nftables"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/testutil"
)

func manyMappings(n, first int) []PortMapping {
	ms := make([]PortMapping, n)
	for i := range ms {
		ms[i] = PortMapping{HostPort: first + i, ContainerPort: 80, Protocol: "tcp"}
	}
	return ms
}

var _ = DescribeTable("1000 port mappings of one attachment",
	func(backend string) {
		hostNS := testutil.NewNS()
		opts := PortMapOptions{Owner: Owner{Network: "n", ContainerID: "c"}, ContainerIPs: []net.IPNet{{IP: net.ParseIP("10.1.0.5")}},
			SNAT: true, MarkMasqBit: DefaultMarkMasqBit, Mappings: manyMappings(1000, 20000)}
		other := opts
		other.Owner.ContainerID = "other"
		other.Mappings = manyMappings(3, 40000)
		other.ContainerIPs = []net.IPNet{{IP: net.ParseIP("10.1.0.6")}}
		Expect(hostNS.Do(func() error {
			defer GinkgoRecover()
			pm, err := NewPortMap(backend)
			Expect(err).NotTo(HaveOccurred())
			Expect(pm.Setup(other)).To(Succeed())
			Expect(pm.Setup(opts)).To(Succeed())
			Expect(pm.Check(opts)).To(Succeed())
			if backend == BackendNFTables {
				// every mapping is an element, none was cut off
				c, err := nftables.New()
				Expect(err).NotTo(HaveOccurred())
				els, err := c.GetSetElements(&nftables.Set{Table: pmTableOf(ipv4), Name: pmPortsMap})
				Expect(err).NotTo(HaveOccurred())
				Expect(els).To(HaveLen(1003))
			}
			ips, err := pm.Teardown(opts.Owner)
			Expect(err).NotTo(HaveOccurred())
			Expect(ips).To(HaveLen(1))
			Expect(ips[0].String()).To(Equal("10.1.0.5"))
			Expect(pm.Check(opts)).To(MatchError(ErrPortMapMissing))
			Expect(pm.Check(other)).To(Succeed(), "another attachment's mappings stay")
			return nil
		})).To(Succeed())
	},
	Entry("iptables", BackendIPTables),
	Entry("nftables", BackendNFTables),
)
