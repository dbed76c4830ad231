package kernelfeature_test

import (
	"net"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/kernelfeature"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

// These specs prove the VM lane: on a kernel without the link kinds they
// skip (this CI host), in the lane they must run and pass. Plugin specs for
// ipvlan, vlan, vrf, dummy and bridge VLANs follow the same pattern.
var _ = Describe("the link kinds the plugins need", Label(kernelfeature.Label), func() {
	var (
		hostNS *ns.NetNS
		h      *netlink.Handle
	)

	BeforeEach(func() {
		hostNS = testutil.NewNS()
		var err error
		h, err = hostNS.Handle()
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(h.Close)
	})

	addVeth := func(name, peer string) netlink.Link {
		GinkgoHelper()
		Expect(h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: peer})).To(Succeed())
		l, err := h.LinkByName(name)
		Expect(err).NotTo(HaveOccurred())
		return l
	}

	// moveAndAddress moves link name from h into a fresh namespace, gives
	// it addr and sets it up there, and returns that namespace.
	moveAndAddress := func(name, addr string) *ns.NetNS {
		GinkgoHelper()
		to := testutil.NewNS()
		l, err := h.LinkByName(name)
		Expect(err).NotTo(HaveOccurred())
		Expect(h.LinkSetNsFd(l, int(to.Fd()))).To(Succeed())
		th, err := to.Handle()
		Expect(err).NotTo(HaveOccurred())
		defer th.Close()
		l, err = th.LinkByName(name)
		Expect(err).NotTo(HaveOccurred())
		a, err := netlink.ParseAddr(addr)
		Expect(err).NotTo(HaveOccurred())
		Expect(th.AddrAdd(l, a)).To(Succeed())
		Expect(th.LinkSetUp(l)).To(Succeed())
		return to
	}

	It("creates ipvlan links in l2 and l3 mode that carry traffic", func() {
		kernelfeature.Require(kernelfeature.IPVlan)
		parent := addVeth("parent0", "parent1")
		// ipvlan slaves follow the parent's carrier: both veth ends up.
		peer, err := h.LinkByName("parent1")
		Expect(err).NotTo(HaveOccurred())
		Expect(h.LinkSetUp(peer)).To(Succeed())
		Expect(h.LinkSetUp(parent)).To(Succeed())
		modes := map[string]netlink.IPVlanMode{
			"l2a": netlink.IPVLAN_MODE_L2, "l2b": netlink.IPVLAN_MODE_L2,
			"l3a": netlink.IPVLAN_MODE_L3,
		}
		for name, mode := range modes {
			Expect(h.LinkAdd(&netlink.IPVlan{
				LinkAttrs: netlink.LinkAttrs{Name: name, ParentIndex: parent.Attrs().Index},
				Mode:      mode,
			})).To(Succeed(), "add ipvlan %s", name)
			l, err := h.LinkByName(name)
			Expect(err).NotTo(HaveOccurred())
			Expect(l).To(BeAssignableToTypeOf(&netlink.IPVlan{}))
			Expect(l.(*netlink.IPVlan).Mode).To(Equal(mode), "mode of %s", name)
			Expect(l.Attrs().ParentIndex).To(Equal(parent.Attrs().Index))
		}
		// Two l2 slaves of one parent reach each other from separate
		// namespaces: what two pods on the ipvlan plugin do.
		a := moveAndAddress("l2a", "10.91.0.1/24")
		moveAndAddress("l2b", "10.91.0.2/24")
		Expect(testutil.Ping(a, "10.91.0.2")).To(Succeed())
	})

	It("creates an 802.1Q vlan link that tags traffic across a veth", func() {
		kernelfeature.Require(kernelfeature.VLAN)
		left := addVeth("left", "right")
		right, err := h.LinkByName("right")
		Expect(err).NotTo(HaveOccurred())
		Expect(h.LinkSetUp(left)).To(Succeed())
		Expect(h.LinkSetUp(right)).To(Succeed())
		for name, parent := range map[string]netlink.Link{"left.100": left, "right.100": right} {
			Expect(h.LinkAdd(&netlink.Vlan{
				LinkAttrs: netlink.LinkAttrs{Name: name, ParentIndex: parent.Attrs().Index},
				VlanId:    100,
			})).To(Succeed(), "add vlan %s", name)
			l, err := h.LinkByName(name)
			Expect(err).NotTo(HaveOccurred())
			Expect(l.(*netlink.Vlan).VlanId).To(Equal(100))
			Expect(l.(*netlink.Vlan).VlanProtocol).To(Equal(netlink.VLAN_PROTOCOL_8021Q))
		}
		a := moveAndAddress("left.100", "10.92.0.1/24")
		moveAndAddress("right.100", "10.92.0.2/24")
		Expect(testutil.Ping(a, "10.92.0.2")).To(Succeed())
	})

	It("creates a dummy link that holds an address", func() {
		kernelfeature.Require(kernelfeature.Dummy)
		Expect(h.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "dummy0"}})).To(Succeed())
		l, err := h.LinkByName("dummy0")
		Expect(err).NotTo(HaveOccurred())
		Expect(l.Type()).To(Equal("dummy"))
		addr, err := netlink.ParseAddr("10.93.0.1/32")
		Expect(err).NotTo(HaveOccurred())
		Expect(h.AddrAdd(l, addr)).To(Succeed())
		Expect(h.LinkSetUp(l)).To(Succeed())
		got, err := h.AddrList(l, netlink.FAMILY_V4)
		Expect(err).NotTo(HaveOccurred())
		Expect(got).To(ContainElement(HaveField("IPNet.IP", Equal(net.ParseIP("10.93.0.1").To4()))))
	})

	It("creates a vrf and enslaves a link to it", func() {
		kernelfeature.Require(kernelfeature.VRF)
		Expect(h.LinkAdd(&netlink.Vrf{LinkAttrs: netlink.LinkAttrs{Name: "vrf-blue"}, Table: 1001})).To(Succeed())
		vrf, err := h.LinkByName("vrf-blue")
		Expect(err).NotTo(HaveOccurred())
		Expect(vrf.(*netlink.Vrf).Table).To(Equal(uint32(1001)))
		Expect(h.LinkSetUp(vrf)).To(Succeed())
		port := addVeth("inblue", "inblue-peer")
		Expect(h.LinkSetMaster(port, vrf)).To(Succeed())
		port, err = h.LinkByName("inblue")
		Expect(err).NotTo(HaveOccurred())
		Expect(port.Attrs().MasterIndex).To(Equal(vrf.Attrs().Index))
	})

	It("creates a vlan_filtering bridge and sets a port's vlans", func() {
		kernelfeature.Require(kernelfeature.BridgeVLANFiltering)
		on := true
		Expect(h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}, VlanFiltering: &on})).To(Succeed())
		br, err := h.LinkByName("br0")
		Expect(err).NotTo(HaveOccurred())
		Expect(br.(*netlink.Bridge).VlanFiltering).To(HaveValue(BeTrue()))
		port := addVeth("brport", "brport-peer")
		Expect(h.LinkSetMaster(port, br)).To(Succeed())
		// Access port on vlan 10 (bridge "vlan"), trunk of 20 (vlanTrunk).
		Expect(h.BridgeVlanAdd(port, 10, true, true, false, true)).To(Succeed())
		Expect(h.BridgeVlanAdd(port, 20, false, false, false, true)).To(Succeed())
		vlans, err := h.BridgeVlanList()
		Expect(err).NotTo(HaveOccurred())
		Expect(vlans).To(HaveKey(int32(port.Attrs().Index)))
		var vids []uint16
		for _, v := range vlans[int32(port.Attrs().Index)] {
			vids = append(vids, v.Vid)
			switch v.Vid {
			case 10:
				Expect(v.PortVID()).To(BeTrue(), "vlan 10 is the port's pvid")
				Expect(v.EngressUntag()).To(BeTrue(), "vlan 10 leaves untagged")
			case 20:
				Expect(v.PortVID()).To(BeFalse(), "vlan 20 is tagged only")
				Expect(v.EngressUntag()).To(BeFalse(), "vlan 20 leaves tagged")
			default:
				Expect(v.PortVID()).To(BeFalse(), "only vlan 10 is the pvid, not %d", v.Vid)
			}
		}
		Expect(vids).To(ContainElements(uint16(10), uint16(20)))
	})
})
