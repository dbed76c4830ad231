package dhcp

import (
	"net"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/testutil"
)

var _ = Describe("DHCPv6", func() {
	var l *lab
	BeforeEach(func() {
		l = newLab()
		l.addV6()
		l.startDnsmasq("--dhcp-range=fd99::10,fd99::50,64,2m")
		l.startDaemon()
	})

	It("with ipFamilies [ipv4, ipv6] gets an address of each family, keeps it across a retried ADD, and DEL releases both", func() {
		conf := l.conf("1.1.0", `, "ipFamilies": ["ipv4", "ipv6"]`)
		out := l.call("ADD", "ctr6", conf)
		Expect(out.Err).To(BeNil())
		res := testutil.ParseResult("1.1.0", out.Stdout)
		Expect(res.IPs).To(HaveLen(2))
		Expect(inPool(res.IPs[0].Address.IP)).To(BeTrue())
		v6 := res.IPs[1].Address
		_, pool, _ := net.ParseCIDR("fd99::/64")
		Expect(pool.Contains(v6.IP)).To(BeTrue(), "%s", v6.String())
		Expect(v6.Mask).To(Equal(net.CIDRMask(128, 128)))
		Expect(l.leases6()).To(HaveKey(v6.IP.String()))

		again := l.call("ADD", "ctr6", conf)
		Expect(again.Err).To(BeNil())
		Expect(testutil.ParseResult("1.1.0", again.Stdout).IPs[1].Address.String()).To(Equal(v6.String()))

		Expect(l.call("DEL", "ctr6", conf).Err).To(BeNil())
		Eventually(l.leases6).Should(BeEmpty(), func() string { return "no DHCPv6 release seen:\n" + l.dnsmasqLog() })
		Eventually(l.leases).Should(BeEmpty())
		Expect(l.records()).To(BeEmpty())
	})

	It("with ipFamilies [ipv6] runs DHCPv6 alone", func() {
		out := l.call("ADD", "ctr6", l.conf("1.1.0", `, "ipFamilies": ["ipv6"]`))
		Expect(out.Err).To(BeNil())
		res := testutil.ParseResult("1.1.0", out.Stdout)
		Expect(res.IPs).To(HaveLen(1))
		Expect(res.IPs[0].Address.IP.To4()).To(BeNil())
		Expect(l.leases()).To(BeEmpty())
	})
})

var _ = Describe("an ADD that fails midway", func() {
	It("releases the DHCPv4 lease it got when DHCPv6 gets none, and keeps no record", func() {
		l := newLab()
		l.startDnsmasq() // DHCPv4 only: no DHCPv6 server answers
		o := l.daemonOpts()
		o.ResendTimeout = 4 * time.Second
		l.startDaemonWith(o)
		out := l.call("ADD", "ctrX", l.conf("1.1.0", `, "ipFamilies": ["ipv4", "ipv6"]`))
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Msg).To(ContainSubstring("DHCPv6"))
		Expect(l.dnsmasqLog()).To(ContainSubstring("DHCPACK"), "the DHCPv4 half succeeded first")
		Eventually(l.leases).Should(BeEmpty(), "the DHCPv4 lease was not released")
		Expect(l.records()).To(BeEmpty())
		Expect(l.call("DEL", "ctrX", l.conf("1.1.0", `, "ipFamilies": ["ipv4", "ipv6"]`)).Err).To(BeNil())
	})
})
