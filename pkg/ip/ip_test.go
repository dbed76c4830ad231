package ip_test

import (
	"errors"
	"net"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ipam"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

func cidr(s string) net.IPNet {
	addr, n, err := net.ParseCIDR(s)
	Expect(err).NotTo(HaveOccurred())
	n.IP = addr
	return *n
}

var _ = Describe("links, veths and addresses", func() {
	var hostNS, contNS *ns.NetNS
	var hostH, contH *netlink.Handle

	BeforeEach(func() {
		hostNS = testutil.NewNS()
		contNS = testutil.NewNS()
		var err error
		hostH, err = hostNS.Handle()
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(hostH.Close)
		contH, err = contNS.Handle()
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(contH.Close)
	})

	It("deletes a new veth pair again when it cannot look it up (no caller could undo it)", func() {
		_, err := ip.SetupVeth(hostH, ip.WithFailingLookup(ip.VethOptions{ContIfName: "eth0", HostIfName: "vethtest0", ContNS: int(contNS.Fd())}))
		Expect(err).To(MatchError(ContainSubstring("injected lookup failure")))
		Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo"))
		Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo"))
	})

	It("reports a missing link with ErrLinkNotFound and deletes absent links as success", func() {
		_, err := ip.LinkByName(hostH, "nope0")
		Expect(errors.Is(err, ip.ErrLinkNotFound)).To(BeTrue(), "%v", err)
		Expect(ip.DelLinkByName(hostH, "nope0")).To(Succeed())
	})

	It("creates a veth with its peer directly in the container namespace", func() {
		mac, _ := net.ParseMAC("0a:58:0a:01:00:05")
		host, err := ip.SetupVeth(hostH, ip.VethOptions{ContIfName: "eth0", MTU: 1400, ContMAC: mac, ContNS: int(contNS.Fd())})
		Expect(err).NotTo(HaveOccurred())
		Expect(host.Attrs().Name).To(HavePrefix("veth"))
		Expect(host.Attrs().MTU).To(Equal(1400))

		cont, err := ip.LinkByName(contH, "eth0")
		Expect(err).NotTo(HaveOccurred())
		Expect(cont.Attrs().HardwareAddr.String()).To(Equal(mac.String()))
		Expect(cont.Attrs().MTU).To(Equal(1400))
		peer, err := ip.PeerIndex(hostH, host)
		Expect(err).NotTo(HaveOccurred())
		Expect(peer).To(Equal(cont.Attrs().Index))

		// One transmit queue, the one the kernel would leave active,
		// asked for at creation rather than cut down to after it.
		Expect(host.Attrs().NumTxQueues).To(Equal(1))
		Expect(cont.Attrs().NumTxQueues).To(Equal(1))

		// The container already has eth0: a second pair is refused.
		_, err = ip.SetupVeth(hostH, ip.VethOptions{ContIfName: "eth0", ContNS: int(contNS.Fd())})
		Expect(err).To(MatchError(ContainSubstring("already has an interface")))

		// Deleting the container end removes the host end too.
		Expect(ip.DelLinkByName(contH, "eth0")).To(Succeed())
		_, err = ip.LinkByName(hostH, host.Attrs().Name)
		Expect(errors.Is(err, ip.ErrLinkNotFound)).To(BeTrue())
		Expect(ip.DelLinkByName(contH, "eth0")).To(Succeed())
	})

	It("applies an IPAM result to an interface, without DAD for IPv6", func() {
		_, err := ip.SetupVeth(hostH, ip.VethOptions{ContIfName: "eth0", HostIfName: "vhost0", ContNS: int(contNS.Fd())})
		Expect(err).NotTo(HaveOccurred())
		idx := 1
		res := &current.Result{
			Interfaces: []*current.Interface{{Name: "vhost0"}, {Name: "eth0", Sandbox: contNS.Path()}},
			IPs: []*current.IPConfig{
				{Interface: &idx, Address: cidr("10.77.0.5/24"), Gateway: net.ParseIP("10.77.0.1")},
				{Interface: &idx, Address: cidr("fd77::5/64"), Gateway: net.ParseIP("fd77::1")},
			},
			Routes: []*types.Route{
				{Dst: cidr("0.0.0.0/0")},
				{Dst: cidr("192.168.50.0/24"), GW: net.ParseIP("10.77.0.254")},
				{Dst: cidr("::/0")},
			},
		}
		Expect(ipam.ConfigureIface(contH, "eth0", res, ipam.ConfigureOptions{})).To(Succeed())
		// Applying twice is harmless.
		Expect(ipam.ConfigureIface(contH, "eth0", res, ipam.ConfigureOptions{})).To(Succeed())

		link, err := ip.LinkByName(contH, "eth0")
		Expect(err).NotTo(HaveOccurred())
		addrs, err := ip.AddrList(contH, link, netlink.FAMILY_ALL)
		Expect(err).NotTo(HaveOccurred())
		var got []string
		for _, a := range addrs {
			if a.IP.IsLinkLocalUnicast() {
				continue
			}
			got = append(got, a.IPNet.String())
			if a.IP.To4() == nil {
				Expect(a.Flags & 0x80 /* IFA_F_NODAD */).NotTo(BeZero())
			}
		}
		Expect(got).To(ConsistOf("10.77.0.5/24", "fd77::5/64"))

		routes, err := ip.RouteList(contH, link, netlink.FAMILY_ALL)
		Expect(err).NotTo(HaveOccurred())
		var rs []string
		for _, r := range routes {
			if r.Gw != nil {
				rs = append(rs, ip.RouteString(&netlink.Route{Dst: r.Dst, Gw: r.Gw}))
			}
		}
		Expect(rs).To(ContainElements("default via 10.77.0.1", "192.168.50.0/24 via 10.77.0.254", "default via fd77::1"))
	})

	It("reads and writes sysctls of the calling thread's namespace", func() {
		Expect(hostNS.Do(func() error {
			return ip.SetSysctl("net/ipv4/ip_forward", "1")
		})).To(Succeed())
		var inHost, inCont string
		Expect(hostNS.Do(func() (err error) { inHost, err = ip.GetSysctl("net/ipv4/ip_forward"); return })).To(Succeed())
		Expect(contNS.Do(func() (err error) { inCont, err = ip.GetSysctl("net/ipv4/ip_forward"); return })).To(Succeed())
		Expect(inHost).To(Equal("1"))
		Expect(inCont).To(Equal("0"))
	})
})
