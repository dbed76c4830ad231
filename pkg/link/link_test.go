package link_test

import (
	"net"

	current "github.com/containernetworking/cni/pkg/types/100"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/link"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/result"
	"github.com/cniforge/plugins/pkg/testutil"
)

const alias = "cni:c1:eth0"

var _ = Describe("link helpers", func() {
	var (
		hostNS, contNS, peerNS *ns.NetNS
		hostH, contH           *netlink.Handle
	)
	BeforeEach(func() {
		hostNS, contNS, peerNS = testutil.NewNS(), testutil.NewNS(), testutil.NewNS()
		hostH, contH = testutil.Handle(hostNS), testutil.Handle(contNS)
		Expect(testutil.ConnectNS(
			testutil.VethEnd{NS: hostNS, Name: "master0", Addrs: []string{"10.9.0.1/24"}},
			testutil.VethEnd{NS: peerNS, Name: "peer0", Addrs: []string{"10.9.0.2/24"}},
		)).To(Succeed())
	})

	macvlan := func(master netlink.Link) *netlink.Macvlan {
		la := netlink.NewLinkAttrs()
		la.ParentIndex = master.Attrs().Index
		return &netlink.Macvlan{LinkAttrs: la, Mode: netlink.MACVLAN_MODE_BRIDGE}
	}

	It("resolves the master by name, by default route, and refuses a missing one with code 7", func() {
		_, err := link.ResolveMaster(hostNS, hostH, "nope0")
		Expect(result.Code(err)).To(BeEquivalentTo(7))
		Expect(err.Error()).To(ContainSubstring(`"nope0"`))
		_, err = link.ResolveMaster(hostNS, hostH, "")
		Expect(result.Code(err)).To(BeEquivalentTo(7))
		Expect(err.Error()).To(ContainSubstring(`set "master"`))
		m, err := link.ResolveMaster(hostNS, hostH, "master0")
		Expect(err).NotTo(HaveOccurred())
		Expect(hostH.RouteAdd(&netlink.Route{Dst: nil, Gw: net.ParseIP("10.9.0.2")})).To(Succeed())
		d, err := link.ResolveMaster(hostNS, hostH, "")
		Expect(err).NotTo(HaveOccurred())
		Expect(d.Attrs().Index).To(Equal(m.Attrs().Index))
		err = link.CheckMasterMTU(9000, m)
		Expect(result.Code(err)).To(BeEquivalentTo(7))
		Expect(err.Error()).To(And(ContainSubstring("9000"), ContainSubstring("1500"), ContainSubstring("master0")))
		Expect(link.CheckMasterMTU(1500, m)).To(Succeed())
	})

	It("creates through a temporary name, so an eth0 in the host does not collide, then finishes and checks", func() {
		// The host has an eth0 of its own.
		Expect(hostH.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}})).To(Succeed())
		master, err := hostH.LinkByName("master0")
		Expect(err).NotTo(HaveOccurred())
		l, err := link.Create(macvlan(master), link.CreateOptions{MasterNS: hostNS, MasterH: hostH, ContNS: contNS, ContH: contH, IfName: "eth0", Alias: alias})
		Expect(err).NotTo(HaveOccurred())
		Expect(l.Attrs().Name).To(Equal("eth0"))
		Expect(l.Attrs().Alias).To(Equal(alias))
		Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo", "master0", "eth0"))

		ipamRes := &current.Result{IPs: []*current.IPConfig{{Address: mustNet("10.9.0.5/24"), Gateway: net.ParseIP("10.9.0.1")}}}
		res, err := link.Finish(link.FinishOptions{ContNS: contNS, ContH: contH, IfName: "eth0", Sandbox: contNS.Path(), IPAM: ipamRes})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Interfaces).To(HaveLen(1))
		Expect(res.Interfaces[0].Sandbox).To(Equal(contNS.Path()))
		Expect(res.Interfaces[0].Mac).To(Equal(l.Attrs().HardwareAddr.String()))
		Expect(*res.IPs[0].Interface).To(Equal(0))
		Expect(testutil.Addrs(contNS, "eth0")).To(ContainElement("10.9.0.5/24"))
		Expect(testutil.Ping(contNS, "10.9.0.2")).To(Succeed())

		w := link.Want{Kind: "macvlan", Mode: "bridge", Master: master, Iface: res.Interfaces[0], IPs: res.IPs}
		_, err = link.Check(contNS, contH, w)
		Expect(err).NotTo(HaveOccurred())
		w.Mode = "private"
		_, err = link.Check(contNS, contH, w)
		Expect(err).To(MatchError(ContainSubstring(`mode "bridge"`)))
		w.Mode, w.MTU = "", 1400
		_, err = link.Check(contNS, contH, w)
		Expect(err).To(MatchError(ContainSubstring("MTU 1500")))
		w.MTU, w.IPs = 0, []*current.IPConfig{{Address: mustNet("10.9.0.6/24")}}
		_, err = link.Check(contNS, contH, w)
		Expect(err).To(HaveOccurred())

		// Someone else's (other alias) stays; ours goes, twice.
		Expect(link.DeleteOwned(contNS.Path(), "eth0", "macvlan", "cni:other:eth0")).To(Succeed())
		Expect(testutil.LinkNames(contNS)).To(ContainElement("eth0"))
		Expect(link.DeleteOwned(contNS.Path(), "eth0", "ipvlan", alias)).To(Succeed())
		Expect(testutil.LinkNames(contNS)).To(ContainElement("eth0"))
		Expect(link.DeleteOwned(contNS.Path(), "eth0", "macvlan", alias)).To(Succeed())
		Expect(link.DeleteOwned(contNS.Path(), "eth0", "macvlan", alias)).To(Succeed())
		Expect(link.DeleteOwned("/run/netns/gone-for-good", "eth0", "macvlan", alias)).To(Succeed())
		Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo"))
	})

	It("leaves nothing in either namespace when CNI_IFNAME is taken in the container", func() {
		Expect(contH.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}})).To(Succeed())
		master, err := hostH.LinkByName("master0")
		Expect(err).NotTo(HaveOccurred())
		_, err = link.Create(macvlan(master), link.CreateOptions{MasterNS: hostNS, MasterH: hostH, ContNS: contNS, ContH: contH, IfName: "eth0", Alias: alias})
		Expect(err).To(MatchError(ContainSubstring(`already has an interface named "eth0"`)))
		Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo", "master0"))
		Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo", "eth0"))
	})

	It("creates in the container itself when the master lives there", func() {
		Expect(testutil.ConnectNS(
			testutil.VethEnd{NS: contNS, Name: "cmaster"},
			testutil.VethEnd{NS: hostNS, Name: "hpeer"},
		)).To(Succeed())
		master, err := contH.LinkByName("cmaster")
		Expect(err).NotTo(HaveOccurred())
		_, err = link.Create(macvlan(master), link.CreateOptions{MasterNS: contNS, MasterH: contH, ContNS: contNS, ContH: contH, IfName: "net1"})
		Expect(err).NotTo(HaveOccurred())
		Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo", "cmaster", "net1"))
	})

	It("finds the link an ADD killed before the rename left under its temporary name: DEL deletes it, a new ADD replaces it", func() {
		master, err := hostH.LinkByName("master0")
		Expect(err).NotTo(HaveOccurred())
		// What a kill between the kernel's create and the rename leaves:
		// the link in the container, untagged, under the temporary name.
		leave := func() {
			left := macvlan(master)
			left.Name = link.TempName(alias)
			left.Namespace = netlink.NsFd(int(contNS.Fd()))
			Expect(hostH.LinkAdd(left)).To(Succeed())
			Expect(testutil.LinkNames(contNS)).To(ContainElement(link.TempName(alias)))
		}
		leave()
		Expect(link.DeleteOwned(contNS.Path(), "eth0", "macvlan", alias)).To(Succeed())
		Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo"))

		leave()
		_, err = link.Create(macvlan(master), link.CreateOptions{MasterNS: hostNS, MasterH: hostH, ContNS: contNS, ContH: contH, IfName: "eth0", Alias: alias})
		Expect(err).NotTo(HaveOccurred())
		Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo", "eth0"))

		// Another attachment's DEL leaves this one's link alone.
		Expect(link.DeleteOwned(contNS.Path(), "eth0", "macvlan", "cni:other:eth0")).To(Succeed())
		Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo", "eth0"))
	})
})

func mustNet(s string) net.IPNet {
	ip, n, err := net.ParseCIDR(s)
	Expect(err).NotTo(HaveOccurred())
	n.IP = ip
	return *n
}
