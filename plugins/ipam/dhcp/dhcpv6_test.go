package dhcp

import (
	"fmt"
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

	It("renews with Renew messages the server answers (T1 capped to 2 s by a test-only option)", func() {
		o := l.daemonOpts()
		o.SocketPath = l.sock + "6"
		o.StateDir = l.state + "6"
		o.v6T1Cap = 2 * time.Second
		l.startDaemonWith(o)
		conf := fmt.Sprintf(`{"cniVersion": "1.1.0", "name": "dhcpnet", "ipam": {"type": "dhcp", "daemonSocketPath": %q, "ipFamilies": ["ipv6"]}}`, o.SocketPath)
		out := l.call("ADD", "ctr6", conf)
		Expect(out.Err).To(BeNil())
		acquired := func() time.Time {
			recs, err := loadRecords(o.StateDir)
			Expect(err).NotTo(HaveOccurred())
			Expect(recs).To(HaveLen(1))
			return recs[0].V6.Acquired
		}
		last := acquired()
		for i := 0; i < 2; i++ {
			Eventually(acquired).WithTimeout(10 * time.Second).WithPolling(200 * time.Millisecond).Should(BeTemporally(">", last))
			last = acquired()
		}
		Expect(l.dnsmasqLog()).To(ContainSubstring("DHCPRENEW"))
		Expect(l.call("CHECK", "ctr6", string(testutil.WithPrev([]byte(conf), out.Stdout))).Err).NotTo(BeNil(),
			"the address is not on eth0: CHECK must say so even with a live lease")
		Expect(l.call("DEL", "ctr6", conf).Err).To(BeNil())
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
