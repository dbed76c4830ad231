package dhcp

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	current "github.com/containernetworking/cni/pkg/types/100"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ipam"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

// lab is one spec's world: a stand-in host netns with a bridge (10.99.0.1/24)
// that a dnsmasq serves, a container netns whose eth0 is a veth on that
// bridge (as a main plugin would leave it before calling IPAM), and a
// temp folder for the daemon's socket and state and the server's files.
type lab struct {
	hostNS, contNS *ns.NetNS
	dir            string
	sock, state    string
	dnsmasq        *testutil.Dnsmasq
}

const (
	labBridge = "dhcpbr0"
	labGW     = "10.99.0.1"
)

func newLab() *lab {
	GinkgoHelper()
	l := &lab{hostNS: testutil.NewNS(), contNS: testutil.NewNS()}
	// Short: a unix socket path has 108 bytes at most.
	dir, err := os.MkdirTemp("", "dhcp")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dir)
	l.dir, l.sock, l.state = dir, filepath.Join(dir, "d.sock"), filepath.Join(dir, "state")

	h := testutil.Handle(l.hostNS)
	la := netlink.NewLinkAttrs()
	la.Name = labBridge
	br := &netlink.Bridge{LinkAttrs: la}
	Expect(h.LinkAdd(br)).To(Succeed())
	Expect(h.AddrAdd(br, mustAddr(labGW+"/24"))).To(Succeed())
	Expect(h.LinkSetUp(br)).To(Succeed())
	l.addPort("vh0", l.contNS, "eth0")
	return l
}

// newServedLab is newLab with dnsmasq serving the default pool and the
// daemon running: what most specs start from.
func newServedLab() *lab {
	GinkgoHelper()
	l := newLab()
	l.startDnsmasq()
	l.startDaemon()
	return l
}

// addPort makes a veth with one end (ifName) in n and the other (hostName)
// on the lab's bridge, both up.
func (l *lab) addPort(hostName string, n *ns.NetNS, ifName string) {
	GinkgoHelper()
	Expect(testutil.ConnectNS(testutil.VethEnd{NS: l.hostNS, Name: hostName}, testutil.VethEnd{NS: n, Name: ifName})).To(Succeed())
	h := testutil.Handle(l.hostNS)
	port, err := h.LinkByName(hostName)
	Expect(err).NotTo(HaveOccurred())
	br, err := h.LinkByName(labBridge)
	Expect(err).NotTo(HaveOccurred())
	Expect(h.LinkSetMaster(port, br)).To(Succeed())
}

func mustAddr(s string) *netlink.Addr {
	a, err := netlink.ParseAddr(s)
	Expect(err).NotTo(HaveOccurred())
	return a
}

// startDnsmasq runs dnsmasq in the lab's host netns, serving the bridge
// 10.99.0.10-50 with 2-minute leases (dnsmasq's shortest); extra are more
// dnsmasq options. It is stopped by PID when the spec ends.
func (l *lab) startDnsmasq(extra ...string) {
	GinkgoHelper()
	l.dnsmasq = testutil.StartDnsmasq(l.hostNS, l.dir, labBridge,
		append([]string{"--dhcp-range=10.99.0.10,10.99.0.50,255.255.255.0,2m"}, extra...)...)
}

func (l *lab) stopDnsmasq() { l.dnsmasq.Stop() }

// leases returns dnsmasq's DHCPv4 leases (see testutil.Dnsmasq.Leases).
func (l *lab) leases() map[string][]string { return l.dnsmasq.Leases() }

// leases6 returns dnsmasq's DHCPv6 leases (see testutil.Dnsmasq.Leases6).
func (l *lab) leases6() map[string][]string { return l.dnsmasq.Leases6() }

func (l *lab) dnsmasqLog() string { return l.dnsmasq.Log() }

// daemonOpts are short times so the specs see renewals and give-ups soon.
func (l *lab) daemonOpts() Options {
	return Options{SocketPath: l.sock, StateDir: l.state, Timeout: 3 * time.Second,
		ResendMax: 2 * time.Second, ResendTimeout: 10 * time.Second}
}

// startDaemon runs the daemon in-process until the spec ends.
func (l *lab) startDaemon() {
	GinkgoHelper()
	l.startDaemonWith(l.daemonOpts())
}

func (l *lab) startDaemonWith(o Options) {
	GinkgoHelper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o) }()
	DeferCleanup(func() {
		cancel()
		Eventually(done).WithTimeout(30 * time.Second).Should(Receive(BeNil()))
	})
	// Wait on the socket this daemon serves: a spec may give it its own.
	testutil.WaitDHCPDaemon(o.SocketPath)
}

// execDaemon runs the built binary (bin/dhcp daemon) in the lab's host
// netns; kill it with Kill, by PID.
func (l *lab) execDaemon() *testutil.DHCPDaemon {
	GinkgoHelper()
	o := l.daemonOpts()
	return testutil.StartDHCPDaemon(l.hostNS, o.SocketPath, o.StateDir, filepath.Join(l.dir, "daemon.log"),
		"-timeout", o.Timeout.String(), "-resendmax", o.ResendMax.String(), "-resendtimeout", o.ResendTimeout.String(),
		"-pidfile", filepath.Join(l.dir, "daemon.pid"), "-debug")
}

// call runs the plugin in-process in the lab's host netns.
func (l *lab) call(cmd, id, stdin string) testutil.Output {
	GinkgoHelper()
	return testutil.RunIn(l.hostNS, Plugin, testutil.Call{
		Command: cmd, ContainerID: id, Netns: l.contNS.Path(), IfName: "eth0", Stdin: []byte(stdin)})
}

func (l *lab) conf(ver, ipamExtra string) string {
	return fmt.Sprintf(`{"cniVersion": %q, "name": "dhcpnet", "type": "bridge",
		"ipam": {"type": "dhcp", "daemonSocketPath": %q%s}}`, ver, l.sock, ipamExtra)
}

// configure puts res on the container's eth0, as the main plugin would
// (renewals are unicast to that address).
func (l *lab) configure(res *current.Result) {
	GinkgoHelper()
	Expect(ipam.ConfigureIface(testutil.Handle(l.contNS), "eth0", res, ipam.ConfigureOptions{})).To(Succeed())
}

// records lists the daemon's lease files.
func (l *lab) records() []string {
	m, _ := filepath.Glob(filepath.Join(l.state, "*.json"))
	return m
}

// startUdhcpd runs busybox udhcpd in the foreground in the lab's host
// netns instead of dnsmasq: it allows leases of a few seconds (dnsmasq's
// shortest is 2 minutes), so renewal and expiry happen within a spec. It
// serves 10.99.0.60-80 with a leaseSecs lease; stopped by PID.
func (l *lab) startUdhcpd(leaseSecs int) *exec.Cmd {
	GinkgoHelper()
	confPath := filepath.Join(l.dir, "udhcpd.conf")
	conf := fmt.Sprintf(`start 10.99.0.60
end 10.99.0.80
interface %s
lease_file %s
pidfile %s
min_lease 2
auto_time 1
option subnet 255.255.255.0
option router %s
option lease %d
`, labBridge, filepath.Join(l.dir, "udhcpd.leases"), filepath.Join(l.dir, "udhcpd.pid"), labGW, leaseSecs)
	Expect(os.WriteFile(confPath, []byte(conf), 0o644)).To(Succeed())
	logf, err := os.Create(filepath.Join(l.dir, "udhcpd.log"))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(logf.Close)
	cmd := exec.Command("busybox", "udhcpd", "-f", confPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	Expect(l.hostNS.Do(func() error { return cmd.Start() })).To(Succeed())
	DeferCleanup(func() {
		_ = cmd.Process.Kill() // by PID; already gone is fine
		_, _ = cmd.Process.Wait()
	})
	Eventually(func() string {
		b, _ := os.ReadFile(filepath.Join(l.dir, "udhcpd.log"))
		return string(b)
	}).WithTimeout(10*time.Second).Should(ContainSubstring("started"), "udhcpd did not start")
	return cmd
}

// acquiredAt reads when the daemon last got an ACK for the lease in the
// only record of the state dir.
func (l *lab) acquiredAt() time.Time {
	GinkgoHelper()
	recs, err := loadRecords(l.state)
	Expect(err).NotTo(HaveOccurred())
	Expect(recs).To(HaveLen(1))
	Expect(recs[0].V4).NotTo(BeNil())
	return recs[0].V4.Acquired
}

// addV6 gives the lab's bridge fd99::1/64 (no DAD), for a DHCPv6 server.
func (l *lab) addV6() {
	GinkgoHelper()
	h := testutil.Handle(l.hostNS)
	br, err := h.LinkByName(labBridge)
	Expect(err).NotTo(HaveOccurred())
	a := mustAddr("fd99::1/64")
	a.Flags = syscall.IFA_F_NODAD
	Expect(h.AddrAdd(br, a)).To(Succeed())
}
