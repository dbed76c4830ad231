package ip_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/testutil"
)

var _ = Describe("DelMasterIfUnused", func() {
	It("keeps a master that still has a port, deletes one without, and treats one already gone as success", func() {
		hostNS := testutil.NewNS()
		h := testutil.Handle(hostNS)
		br, _, err := ip.EnsureBridge(h, ip.BridgeOptions{Name: "br0"})
		Expect(err).NotTo(HaveOccurred())
		la := netlink.NewLinkAttrs()
		la.Name = "port0"
		Expect(h.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "peer0"})).To(Succeed())
		port, err := ip.LinkByName(h, "port0")
		Expect(err).NotTo(HaveOccurred())
		Expect(ip.AttachPort(h, br, port, ip.PortOptions{})).To(Succeed())

		// Another attachment's port is on it: the master must survive.
		Expect(ip.DelMasterIfUnused(h, br)).To(Succeed())
		Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo", "br0", "port0", "peer0"))

		Expect(h.LinkDel(port)).To(Succeed())
		Expect(ip.DelMasterIfUnused(h, br)).To(Succeed())
		Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo"))

		// br still names the deleted bridge: gone is success.
		Expect(ip.DelMasterIfUnused(h, br)).To(Succeed())
	})
})
