package testutil

import (
	"net/rpc"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ns"
)

// Dnsmasq is a dnsmasq DHCP server a spec started in a namespace it made,
// with its lease, pid and log files in a folder of the spec's.
type Dnsmasq struct {
	cmd *exec.Cmd
	dir string
}

// StartDnsmasq runs dnsmasq in the foreground in n, serving iface (and
// nothing else: no DNS, bound to iface only), with its files in dir. args
// are its DHCP options, at least one --dhcp-range. It returns once dnsmasq
// has bound its sockets and is stopped by PID when the spec ends.
func StartDnsmasq(n *ns.NetNS, dir, iface string, args ...string) *Dnsmasq {
	ginkgo.GinkgoHelper()
	d := &Dnsmasq{dir: dir}
	all := append([]string{
		"--keep-in-foreground", "--conf-file=/dev/null", "--port=0",
		"--interface=" + iface, "--bind-interfaces", "--user=root",
		"--dhcp-authoritative", "--log-dhcp",
		// No ping of an address before offering it: that costs 3 s an ADD.
		"--no-ping",
		"--dhcp-leasefile=" + filepath.Join(dir, "dnsmasq.leases"),
		"--pid-file=" + filepath.Join(dir, "dnsmasq.pid"),
		"--log-facility=" + filepath.Join(dir, "dnsmasq.log"),
	}, args...)
	d.cmd = exec.Command("/usr/sbin/dnsmasq", all...)
	gomega.Expect(n.Do(func() error { return d.cmd.Start() })).To(gomega.Succeed())
	ginkgo.DeferCleanup(d.stop)
	gomega.Eventually(d.Log).WithTimeout(10*time.Second).Should(gomega.ContainSubstring("sockets bound exclusively"), "dnsmasq did not start")
	return d
}

// Stop kills dnsmasq by PID and reaps it (the server goes away).
func (d *Dnsmasq) Stop() {
	ginkgo.GinkgoHelper()
	gomega.Expect(d.cmd.Process.Kill()).To(gomega.Succeed())
	_, _ = d.cmd.Process.Wait()
}

func (d *Dnsmasq) stop() {
	_ = d.cmd.Process.Kill() // by PID; already stopped is fine
	_, _ = d.cmd.Process.Wait()
}

// Leases returns the DHCPv4 leases of dnsmasq's lease file: IP -> the
// line's fields (expiry, MAC, IP, hostname, client ID).
func (d *Dnsmasq) Leases() map[string][]string { return d.leases(false) }

// Leases6 returns the DHCPv6 leases: address -> the line's fields (expiry,
// IAID, address, hostname, client DUID).
func (d *Dnsmasq) Leases6() map[string][]string { return d.leases(true) }

func (d *Dnsmasq) leases(v6 bool) map[string][]string {
	b, _ := os.ReadFile(filepath.Join(d.dir, "dnsmasq.leases")) // a missing file is no lease yet
	out := map[string][]string{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 5 && strings.Contains(f[2], ":") == v6 {
			out[f[2]] = f
		}
	}
	return out
}

// Log returns dnsmasq's log (with --log-dhcp: every DHCP message).
func (d *Dnsmasq) Log() string {
	b, _ := os.ReadFile(filepath.Join(d.dir, "dnsmasq.log")) // not yet written is empty
	return string(b)
}

// DHCPDaemon is the built binary bin/dhcp running as `dhcp daemon`.
type DHCPDaemon struct{ Cmd *exec.Cmd }

// StartDHCPDaemon runs `bin/dhcp daemon -socketpath sock -statedir state
// args...` in n, its output appended to logPath, waits until it answers on
// sock, and SIGKILLs it by PID when the spec ends.
func StartDHCPDaemon(n *ns.NetNS, sock, state, logPath string, args ...string) *DHCPDaemon {
	ginkgo.GinkgoHelper()
	bin := filepath.Join(BinDir(), "dhcp")
	_, err := os.Stat(bin)
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "run ./build_linux.sh first")
	cmd := exec.Command(bin, append([]string{"daemon", "-socketpath", sock, "-statedir", state}, args...)...)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	ginkgo.DeferCleanup(logf.Close)
	cmd.Stdout, cmd.Stderr = logf, logf
	gomega.Expect(n.Do(func() error { return cmd.Start() })).To(gomega.Succeed())
	d := &DHCPDaemon{Cmd: cmd}
	ginkgo.DeferCleanup(d.Kill)
	WaitDHCPDaemon(sock)
	return d
}

// Kill SIGKILLs the daemon (by PID) and reaps it; it may run twice.
func (d *DHCPDaemon) Kill() {
	_ = d.Cmd.Process.Signal(syscall.SIGKILL) // already gone is fine
	_, _ = d.Cmd.Process.Wait()
}

// WaitDHCPDaemon waits until a dhcp daemon answers on sock.
func WaitDHCPDaemon(sock string) {
	ginkgo.GinkgoHelper()
	gomega.Eventually(func() error {
		c, err := rpc.DialHTTP("unix", sock)
		if err == nil {
			c.Close()
		}
		return err
	}).WithTimeout(10 * time.Second).Should(gomega.Succeed())
}
