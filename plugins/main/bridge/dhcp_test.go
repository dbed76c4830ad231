package bridge_test

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/testutil"
)

// Issue 12: bridge carries a lease from a real DHCP server into the
// container. The stand-in host has the bridge (10.98.0.1/24) that dnsmasq
// serves; the dhcp daemon (the built binary) runs there too, on a socket
// of the spec's.
var _ = Describe("bridge with dhcp IPAM", func() {
	It("carries a lease from dnsmasq into the container and releases it on DEL", func() {
		hostNS, contNS := testutil.NewNS(), testutil.NewNS()
		// Short: a unix socket path has 108 bytes at most.
		dir, err := os.MkdirTemp("", "brdhcp")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, dir)
		sock := filepath.Join(dir, "d.sock")

		h := testutil.Handle(hostNS)
		br := addBridge(h, "cnibr0")
		Expect(h.AddrAdd(br, mustAddr("10.98.0.1/24"))).To(Succeed())
		Expect(h.LinkSetUp(br)).To(Succeed())
		srv := testutil.StartDnsmasq(hostNS, dir, "cnibr0",
			"--dhcp-range=10.98.0.10,10.98.0.50,255.255.255.0,2m",
			"--dhcp-option=121,10.60.0.0/16,10.98.0.1")
		testutil.StartDHCPDaemon(hostNS, sock, filepath.Join(dir, "state"), filepath.Join(dir, "daemon.log"), "-timeout", "5s")

		stdin := netConf("1.1.0", "", fmt.Sprintf(`{"type": "dhcp", "daemonSocketPath": %q}`, sock))
		c := testutil.Call{Command: "ADD", ContainerID: "c1", Netns: contNS.Path(), IfName: "eth0", Stdin: stdin}
		out := run(hostNS, c)
		Expect(out.Err).To(BeNil(), "stderr: %s\ndnsmasq: %s", out.Stderr, srv.Log())
		res := testutil.ParseResult("1.1.0", out.Stdout)
		Expect(res.IPs).To(HaveLen(1))
		addr := res.IPs[0].Address
		Expect(addr.String()).To(MatchRegexp(`^10\.98\.0\.(1[0-9]|[2-4][0-9]|50)/24$`))
		Expect(res.IPs[0].Gateway.String()).To(Equal("10.98.0.1"))

		// The container interface carries the lease: address and routes.
		Expect(testutil.Addrs(contNS, "eth0")).To(ContainElement(addr.String()))
		Expect(testutil.Routes(contNS)).To(ContainElement(ContainSubstring("10.60.0.0/16 via 10.98.0.1 dev eth0")))
		// dnsmasq leased it to the container's MAC.
		lease := srv.Leases()[addr.IP.String()]
		Expect(lease).NotTo(BeNil(), "dnsmasq lease file: %v", srv.Leases())
		Expect(lease[1]).To(Equal(res.Interfaces[2].Mac))
		Expect(testutil.Ping(contNS, "10.98.0.1")).To(Succeed())
		chk := c
		chk.Command, chk.Stdin = "CHECK", testutil.WithPrev(stdin, out.Stdout)
		Expect(run(hostNS, chk).Err).To(BeNil())

		c.Command = "DEL"
		Expect(run(hostNS, c).Err).To(BeNil())
		Eventually(srv.Leases).WithTimeout(10*time.Second).Should(Not(HaveKey(addr.IP.String())),
			func() string { return "dnsmasq saw no RELEASE:\n" + srv.Log() })
		Expect(srv.Log()).To(ContainSubstring("DHCPRELEASE(cnibr0) " + addr.IP.String()))
		Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo"))
		Expect(run(hostNS, c).Err).To(BeNil(), "DEL again")
	})
})
