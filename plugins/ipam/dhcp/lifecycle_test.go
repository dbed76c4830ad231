package dhcp

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/testutil"
)

var _ = Describe("CHECK and GC", func() {
	var l *lab
	BeforeEach(func() { l = newServedLab() })

	It("CHECK passes with a live lease whose address is on the interface, and fails otherwise", func() {
		conf := l.conf("1.1.0", "")
		out := l.call("ADD", "ctr1", conf)
		Expect(out.Err).To(BeNil())
		withPrev := string(testutil.WithPrev([]byte(conf), out.Stdout))

		bad := l.call("CHECK", "ctr1", withPrev)
		Expect(bad.Err).NotTo(BeNil(), "the address is not on eth0 yet")
		Expect(bad.Err.Msg).To(ContainSubstring("eth0"))

		l.configure(testutil.ParseResult("1.1.0", out.Stdout))
		Expect(l.call("CHECK", "ctr1", withPrev).Err).To(BeNil())

		Expect(l.call("DEL", "ctr1", conf).Err).To(BeNil())
		gone := l.call("CHECK", "ctr1", withPrev)
		Expect(gone.Err).NotTo(BeNil())
		Expect(gone.Err.Msg).To(ContainSubstring("no lease for ctr1/dhcpnet/eth0"))
	})

	It("GC releases the leases of attachments it does not list, and keeps the rest", func() {
		other := testutil.NewNS()
		l.addPort("vh1", other, "eth0")
		conf := l.conf("1.1.0", "")
		a := l.call("ADD", "keep", conf)
		Expect(a.Err).To(BeNil())
		b := testutil.RunIn(l.hostNS, Plugin, testutil.Call{Command: "ADD", ContainerID: "leak",
			Netns: other.Path(), IfName: "eth0", Stdin: []byte(conf)})
		Expect(b.Err).To(BeNil())
		leakIP := testutil.ParseResult("1.1.0", b.Stdout).IPs[0].Address.IP.String()
		keepIP := testutil.ParseResult("1.1.0", a.Stdout).IPs[0].Address.IP.String()
		Expect(l.records()).To(HaveLen(2))

		gc := `{"cniVersion": "1.1.0", "name": "dhcpnet", "type": "bridge",
			"ipam": {"type": "dhcp", "daemonSocketPath": "` + l.sock + `"},
			"cni.dev/valid-attachments": [{"containerID": "keep", "ifname": "eth0"}]}`
		Expect(l.call("GC", "", gc).Err).To(BeNil())
		Expect(l.records()).To(HaveLen(1))
		Eventually(l.leases).Should(And(HaveKey(keepIP), Not(HaveKey(leakIP))), "dnsmasq saw no RELEASE for the leaked one")

		// A malformed list is refused before anything is released.
		bad := l.call("GC", "", `{"cniVersion": "1.1.0", "name": "dhcpnet", "ipam": {"type": "dhcp", "daemonSocketPath": "`+l.sock+`"},
			"cni.dev/valid-attachments": [{}]}`)
		Expect(bad.Err).NotTo(BeNil())
		Expect(bad.Err.Code).To(Equal(uint(types.ErrInvalidNetworkConfig)))
		Expect(l.records()).To(HaveLen(1))
	})

	// Issue 14, kills mid-ADD: the runtime SIGKILLs the plugin while the
	// daemon is still acquiring (net/rpc runs the call to its end), removes
	// the namespace and runs GC. GC used to see only stored leases, so the
	// lease stored after it stayed, renewed, forever.
	It("GC releases the lease of an ADD still under way whose plugin was killed", func() {
		l.stopDnsmasq()
		l.startDnsmasq("--dhcp-reply-delay=2") // ADD takes 2 s or more
		conf := l.conf("1.1.0", "")
		var add *testutil.Proc
		Expect(l.hostNS.Do(func() (err error) {
			add, err = testutil.Start("dhcp", testutil.Call{Command: "ADD", ContainerID: "killed",
				Netns: l.contNS.Path(), IfName: "eth0", Stdin: []byte(conf)})
			return err
		})).To(Succeed())
		Eventually(l.dnsmasqLog).WithTimeout(10*time.Second).Should(ContainSubstring("DHCPDISCOVER"), "the daemon has not asked yet")
		_, killed, _, err := add.KillGroupAfter(0)
		Expect(err).NotTo(HaveOccurred())
		Expect(killed).To(BeTrue(), "ADD finished before the kill: the spec shows nothing")
		Expect(l.records()).To(BeEmpty(), "the lease is not stored yet")

		gc := `{"cniVersion": "1.1.0", "name": "dhcpnet", "type": "bridge",
			"ipam": {"type": "dhcp", "daemonSocketPath": "` + l.sock + `"}, "cni.dev/valid-attachments": []}`
		Expect(l.call("GC", "", gc).Err).To(BeNil())
		Expect(l.records()).To(BeEmpty())
		Consistently(l.records).WithTimeout(8*time.Second).Should(BeEmpty(), "a lease was stored after GC")
		Eventually(l.leases).WithTimeout(10*time.Second).Should(BeEmpty(), "dnsmasq saw no RELEASE")
	})

	It("GC leaves other networks' leases alone", func() {
		Expect(l.call("ADD", "ctr1", l.conf("1.1.0", "")).Err).To(BeNil())
		gc := `{"cniVersion": "1.1.0", "name": "othernet", "ipam": {"type": "dhcp", "daemonSocketPath": "` + l.sock + `"}}`
		Expect(l.call("GC", "", gc).Err).To(BeNil())
		Expect(l.records()).To(HaveLen(1))
	})
})

var _ = Describe("short leases (udhcpd)", func() {
	const leaseSecs = 4 // T1 2 s, T2 3.5 s
	var l *lab
	BeforeEach(func() { l = newLab() })

	It("renews: the lease is still held after several lease times", func() {
		l.startUdhcpd(leaseSecs)
		l.startDaemon()
		conf := l.conf("1.1.0", "")
		out := l.call("ADD", "ctr1", conf)
		Expect(out.Err).To(BeNil())
		l.configure(testutil.ParseResult("1.1.0", out.Stdout))
		first := l.acquiredAt()
		withPrev := string(testutil.WithPrev([]byte(conf), out.Stdout))

		// Three renewals (each moves the ACK time on), then CHECK: more
		// than a lease time has passed since the first ACK, so without
		// renewals the lease would have expired.
		last := first
		for i := 0; i < 3; i++ {
			Eventually(l.acquiredAt).WithTimeout(3 * leaseSecs * time.Second).WithPolling(200 * time.Millisecond).
				Should(BeTemporally(">", last))
			last = l.acquiredAt()
		}
		Expect(last.Sub(first)).To(BeNumerically(">=", leaseSecs/2*time.Second))
		Expect(l.call("CHECK", "ctr1", withPrev).Err).To(BeNil())
	})

	It("stops and forgets the lease when the interface disappears", func() {
		l.startUdhcpd(leaseSecs)
		l.startDaemon()
		out := l.call("ADD", "ctr1", l.conf("1.1.0", ""))
		Expect(out.Err).To(BeNil())
		Expect(l.records()).To(HaveLen(1))
		h := testutil.Handle(l.contNS)
		eth0, err := h.LinkByName("eth0")
		Expect(err).NotTo(HaveOccurred())
		Expect(h.LinkDel(eth0)).To(Succeed())
		// At T1 the daemon finds no interface to renew on.
		Eventually(l.records).WithTimeout(3 * leaseSecs * time.Second).WithPolling(200 * time.Millisecond).Should(BeEmpty())
		Expect(l.call("DEL", "ctr1", l.conf("1.1.0", "")).Err).To(BeNil())
	})

	It("the server goes away: STATUS stays OK, CHECK reports the lease lost once it expires", func() {
		srv := l.startUdhcpd(leaseSecs)
		l.startDaemon()
		conf := l.conf("1.1.0", "")
		out := l.call("ADD", "ctr1", conf)
		Expect(out.Err).To(BeNil())
		l.configure(testutil.ParseResult("1.1.0", out.Stdout))
		withPrev := string(testutil.WithPrev([]byte(conf), out.Stdout))
		Expect(l.call("CHECK", "ctr1", withPrev).Err).To(BeNil())

		Expect(srv.Process.Kill()).To(Succeed())
		_, _ = srv.Process.Wait()

		Eventually(func() *types.Error { return l.call("CHECK", "ctr1", withPrev).Err }).
			WithTimeout(4 * leaseSecs * time.Second).WithPolling(500 * time.Millisecond).
			Should(And(Not(BeNil()), WithTransform(func(e *types.Error) string { return e.Msg }, ContainSubstring("lease"))))
		Expect(l.call("STATUS", "", conf).Err).To(BeNil())
		// DEL still succeeds with no server to hear the RELEASE.
		Expect(l.call("DEL", "ctr1", conf).Err).To(BeNil())
		Expect(l.records()).To(BeEmpty())
	})
})

var _ = Describe("the daemon process", func() {
	It("resumes renewing after SIGKILL and a restart, and a retried ADD gets the same address", func() {
		l := newLab()
		l.startUdhcpd(4)
		d := l.execDaemon()
		conf := l.conf("1.1.0", "")
		out := l.call("ADD", "ctr1", conf)
		Expect(out.Err).To(BeNil())
		res := testutil.ParseResult("1.1.0", out.Stdout)
		l.configure(res)

		d.Kill()
		_, err := os.Stat(l.sock)
		Expect(err).NotTo(HaveOccurred(), "SIGKILL leaves the socket file behind")
		Expect(l.call("STATUS", "", conf).Err).NotTo(BeNil(), "a stale socket is no daemon")
		before := l.acquiredAt()

		l.execDaemon() // over the stale socket
		Eventually(l.acquiredAt).WithTimeout(12*time.Second).WithPolling(200*time.Millisecond).
			Should(BeTemporally(">", before), "the restarted daemon did not renew")

		again := l.call("ADD", "ctr1", conf)
		Expect(again.Err).To(BeNil())
		Expect(testutil.ParseResult("1.1.0", again.Stdout).IPs[0].Address.String()).To(Equal(res.IPs[0].Address.String()))
		Expect(l.call("CHECK", "ctr1", string(testutil.WithPrev([]byte(conf), again.Stdout))).Err).To(BeNil())
		Expect(l.call("DEL", "ctr1", conf).Err).To(BeNil())
	})

	It("refuses to start over a socket a live daemon serves", func() {
		l := newLab()
		l.startDaemon()
		err := Run(context.Background(), l.daemonOpts())
		Expect(err).To(MatchError(ContainSubstring("another daemon is serving")))
	})

	It("serves a socket systemd passes (LISTEN_FDS, LISTEN_PID)", func() {
		l := newLab()
		l.startDnsmasq()
		ln, err := net.Listen("unix", l.sock)
		Expect(err).NotTo(HaveOccurred())
		f, err := ln.(*net.UnixListener).File()
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(ln.Close)
		DeferCleanup(f.Close)

		// sh sets LISTEN_PID to its own PID, which exec hands to the daemon.
		bin := filepath.Join(testutil.BinDir(), "dhcp")
		cmd := exec.Command("sh", "-c", `LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" daemon -statedir "$1" -socketpath "$2"`,
			bin, l.state, filepath.Join(l.dir, "unused.sock"))
		cmd.ExtraFiles = []*os.File{f} // fd 3
		Expect(l.hostNS.Do(func() error { return cmd.Start() })).To(Succeed())
		p := &testutil.DHCPDaemon{Cmd: cmd}
		DeferCleanup(p.Kill)

		conf := l.conf("1.1.0", "")
		Eventually(func() *types.Error { return l.call("STATUS", "", conf).Err }).WithTimeout(10 * time.Second).Should(BeNil())
		out := l.call("ADD", "ctr1", conf)
		Expect(out.Err).To(BeNil())
		Expect(l.records()).To(HaveLen(1))
		Expect(l.call("DEL", "ctr1", conf).Err).To(BeNil())
	})
})
