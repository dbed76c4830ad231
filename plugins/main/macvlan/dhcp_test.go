package macvlan_test

import (
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/main/macvlan"
)

// The dhcp daemon acquires its lease on the container interface, inside
// the container namespace: macvlan must make the link and bring it up
// before IPAM ADD (upstream's order). master0 in the stand-in host is
// wired to srv0 (10.1.1.1/24) in a server namespace running dnsmasq; the
// dhcp daemon (the built binary) runs in the stand-in host.
var _ = Describe("macvlan with dhcp IPAM", func() {
	It("gets a lease from dnsmasq behind the master and releases it on DEL", func() {
		hostNS, contNS, srvNS := testutil.NewNS(), testutil.NewNS(), testutil.NewNS()
		Expect(testutil.ConnectNS(
			testutil.VethEnd{NS: hostNS, Name: "master0"},
			testutil.VethEnd{NS: srvNS, Name: "srv0", Addrs: []string{peerIP + "/24"}},
		)).To(Succeed())
		// Short: a unix socket path has 108 bytes at most.
		dir, err := os.MkdirTemp("", "mvdhcp")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, dir)
		sock := filepath.Join(dir, "d.sock")
		srv := testutil.StartDnsmasq(srvNS, dir, "srv0",
			"--dhcp-range=10.1.1.10,10.1.1.50,255.255.255.0,2m",
			"--dhcp-option=121,10.60.0.0/16,"+peerIP)
		testutil.StartDHCPDaemon(hostNS, sock, filepath.Join(dir, "state"), filepath.Join(dir, "daemon.log"), "-timeout", "5s")

		stdin := testutil.MergeConf(conf("1.1.0", ""), map[string]any{
			"ipam": map[string]any{"type": "dhcp", "daemonSocketPath": sock},
			"dns":  nil,
		})
		c := testutil.Call{Command: "ADD", ContainerID: "c1", Netns: contNS.Path(), IfName: "eth0", Stdin: stdin}
		out := testutil.RunIn(hostNS, macvlan.Plugin, c)
		Expect(out.Err).To(BeNil(), "stderr: %s\ndnsmasq: %s", out.Stderr, srv.Log())
		res := testutil.ParseResult("1.1.0", out.Stdout)
		Expect(res.IPs).To(HaveLen(1))
		addr := res.IPs[0].Address
		Expect(addr.String()).To(MatchRegexp(`^10\.1\.1\.(1[0-9]|[2-4][0-9]|50)/24$`))
		Expect(res.IPs[0].Gateway.String()).To(Equal(peerIP))

		Expect(testutil.Addrs(contNS, "eth0")).To(ContainElement(addr.String()))
		Expect(testutil.Routes(contNS)).To(ContainElement(ContainSubstring("10.60.0.0/16 via " + peerIP + " dev eth0")))
		lease := srv.Leases()[addr.IP.String()]
		Expect(lease).NotTo(BeNil(), "dnsmasq lease file: %v", srv.Leases())
		Expect(lease[1]).To(Equal(res.Interfaces[0].Mac))
		Expect(testutil.Ping(contNS, peerIP)).To(Succeed())
		chk := c
		chk.Command, chk.Stdin = "CHECK", testutil.WithPrev(stdin, out.Stdout)
		Expect(testutil.RunIn(hostNS, macvlan.Plugin, chk).Err).To(BeNil())

		c.Command = "DEL"
		Expect(testutil.RunIn(hostNS, macvlan.Plugin, c).Err).To(BeNil())
		Eventually(srv.Leases).WithTimeout(10*time.Second).Should(Not(HaveKey(addr.IP.String())),
			func() string { return "dnsmasq saw no RELEASE:\n" + srv.Log() })
		Expect(srv.Log()).To(ContainSubstring("DHCPRELEASE(srv0) " + addr.IP.String()))
		Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo"))
		Expect(testutil.RunIn(hostNS, macvlan.Plugin, c).Err).To(BeNil(), "DEL again")
	})
})
