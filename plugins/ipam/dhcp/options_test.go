package dhcp

import (
	"net"

	"github.com/insomniacslk/dhcp/dhcpv4"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/testutil"
)

func ack(opts ...dhcpv4.Option) *dhcpv4.DHCPv4 {
	GinkgoHelper()
	mods := []dhcpv4.Modifier{dhcpv4.WithYourIP(net.IPv4(10, 99, 0, 20))}
	for _, o := range opts {
		mods = append(mods, dhcpv4.WithOption(o))
	}
	m, err := dhcpv4.New(mods...)
	Expect(err).NotTo(HaveOccurred())
	return m
}

func mustCIDR(s string) *net.IPNet {
	_, n, err := net.ParseCIDR(s)
	Expect(err).NotTo(HaveOccurred())
	return n
}

var _ = Describe("result4", func() {
	router := dhcpv4.OptRouter(net.IPv4(10, 99, 0, 1))
	mask := dhcpv4.OptSubnetMask(net.CIDRMask(24, 32))

	It("gives a default route through the router", func() {
		ip, routes := result4(ack(router, mask), 0)
		Expect(ip.Address.String()).To(Equal("10.99.0.20/24"))
		Expect(ip.Gateway.String()).To(Equal("10.99.0.1"))
		Expect(routes).To(HaveLen(1))
		Expect(routes[0].Dst.String()).To(Equal("0.0.0.0/0"))
		Expect(routes[0].GW.String()).To(Equal("10.99.0.1"))
		Expect(routes[0].Scope).To(BeNil())
	})

	It("uses option 121 alone when the server sends it; routes with no router get link scope", func() {
		csr := dhcpv4.OptClasslessStaticRoute(
			&dhcpv4.Route{Dest: mustCIDR("10.50.0.0/16"), Router: net.IPv4(10, 99, 0, 1)},
			&dhcpv4.Route{Dest: mustCIDR("192.168.7.0/24"), Router: net.IPv4zero},
		)
		_, routes := result4(ack(router, mask, csr), 300)
		Expect(routes).To(HaveLen(2)) // no default route from option 3 (RFC 3442)
		Expect(routes[0].Dst.String()).To(Equal("10.50.0.0/16"))
		Expect(routes[0].GW.String()).To(Equal("10.99.0.1"))
		Expect(routes[0].Scope).To(BeNil())
		Expect(routes[0].Priority).To(Equal(300))
		Expect(routes[1].Dst.String()).To(Equal("192.168.7.0/24"))
		Expect(routes[1].GW).To(BeNil())
		Expect(routes[1].Scope).NotTo(BeNil())
		Expect(*routes[1].Scope).To(Equal(int(netlink.SCOPE_LINK)))
	})

	It("reads option 33 routes beside the router's default route", func() {
		static := dhcpv4.OptGeneric(dhcpv4.OptionStaticRoutingTable, []byte{10, 60, 0, 0, 10, 99, 0, 2})
		_, routes := result4(ack(router, mask, static), 0)
		Expect(routes).To(HaveLen(2))
		Expect(routes[0].Dst.String()).To(Equal("10.0.0.0/8")) // classful, as option 33 is
		Expect(routes[0].GW.String()).To(Equal("10.99.0.2"))
		Expect(routes[1].Dst.String()).To(Equal("0.0.0.0/0"))
	})
})

var _ = Describe("options against dnsmasq", func() {
	var l *lab
	BeforeEach(func() { l = newLab() })

	It("provide with fromArg sends the CNI_ARGS value (the server records the host name)", func() {
		l.startDnsmasq()
		l.startDaemon()
		conf := l.conf("1.1.0", `, "provide": [{"option": "host-name", "fromArg": "K8S_POD_NAME"}]`)
		out := testutil.RunIn(l.hostNS, Plugin, testutil.Call{Command: "ADD", ContainerID: "ctr1",
			Netns: l.contNS.Path(), IfName: "eth0", Args: "IgnoreUnknown=1;K8S_POD_NAME=web-0;K8S_POD_NAMESPACE=default",
			Stdin: []byte(conf)})
		Expect(out.Err).To(BeNil())
		ip := testutil.ParseResult("1.1.0", out.Stdout).IPs[0].Address.IP.String()
		Expect(l.leases()[ip]).To(HaveLen(5))
		Expect(l.leases()[ip][3]).To(Equal("web-0"))
	})

	It("installs option 121 routes (link scope without a router) with the configured priority", func() {
		l.startDnsmasq("--dhcp-option=121,10.50.0.0/16,10.99.0.1,192.168.7.0/24,0.0.0.0")
		l.startDaemon()
		out := l.call("ADD", "ctr1", l.conf("1.1.0", `, "priority": 300`))
		Expect(out.Err).To(BeNil())
		res := testutil.ParseResult("1.1.0", out.Stdout)
		var dsts []string
		for _, r := range res.Routes {
			dsts = append(dsts, r.Dst.String())
			Expect(r.Priority).To(Equal(300))
		}
		Expect(dsts).To(ConsistOf("10.50.0.0/16", "192.168.7.0/24"))

		l.configure(res)
		routes := testutil.Routes(l.contNS)
		Expect(routes).To(ContainElement(And(ContainSubstring("10.50.0.0/16"), ContainSubstring("10.99.0.1"))))
		Expect(routes).To(ContainElement(HavePrefix("192.168.7.0/24 dev eth0 scope link")), "%v", routes)
	})

	It("asks for extra options with request, and only those with skipDefault", func() {
		l.startDnsmasq()
		l.startDaemon()
		Expect(l.call("ADD", "ctr1", l.conf("1.1.0", `, "request": [{"skipDefault": true, "option": "router"}, {"option": "42"}]`)).Err).To(BeNil())
		Expect(l.dnsmasqLog()).To(ContainSubstring("requested options: 3:router, 42:ntp-server"))
	})
})
