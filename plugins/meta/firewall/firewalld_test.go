package firewall_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/meta/firewall"
)

// startFirewalld runs a real firewalld in hostNS (a throwaway netns) and a
// private mount namespace with a tmpfs on /run, talking to a dbus-daemon of
// its own whose socket is in a temporary directory; both are stopped by
// their PIDs when the spec ends. It returns the bus address.
func startFirewalld(hostNS *ns.NetNS) string {
	GinkgoHelper()
	for _, bin := range []string{"firewalld", "dbus-daemon", "firewall-cmd", "unshare"} {
		_, err := exec.LookPath(bin)
		Expect(err).NotTo(HaveOccurred(), "%s is needed (.ci/run installs firewalld and dbus)", bin)
	}
	dir := GinkgoT().TempDir()
	bus := "unix:path=" + filepath.Join(dir, "bus")
	script := fmt.Sprintf(`set -e
mount -t tmpfs tmpfs /run
dbus-daemon --config-file=/usr/share/dbus-1/system.conf --address=%[1]s --nofork --nopidfile &
echo $! > %[2]s/pids
for i in $(seq 200); do [ -S %[2]s/bus ] && break; sleep 0.05; done
DBUS_SYSTEM_BUS_ADDRESS=%[1]s firewalld --nofork --nopid &
echo $! >> %[2]s/pids
wait
`, bus, dir)
	cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", script)
	cmd.Stdout, cmd.Stderr = GinkgoWriter, GinkgoWriter
	Expect(hostNS.Do(cmd.Start)).To(Succeed()) // the child inherits hostNS
	DeferCleanup(func() {
		data, _ := os.ReadFile(filepath.Join(dir, "pids")) // absent: nothing started
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGTERM) // best effort: may have exited
			}
		}
		_ = cmd.Wait() // the shell ends with its children
	})
	Eventually(func() error {
		c := exec.Command("firewall-cmd", "--state")
		c.Env = append(os.Environ(), "DBUS_SYSTEM_BUS_ADDRESS="+bus)
		out, err := c.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	}).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	return bus
}

func zoneSources(bus, zone string) string {
	GinkgoHelper()
	c := exec.Command("firewall-cmd", "--zone="+zone, "--list-sources")
	c.Env = append(os.Environ(), "DBUS_SYSTEM_BUS_ADDRESS="+bus)
	out, err := c.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))
	return strings.TrimSpace(string(out))
}

var _ = Describe("firewall on firewalld", Label("firewalld"), func() {
	var hostNS, contNS *ns.NetNS
	var bus string

	BeforeEach(func() {
		hostNS, contNS = testutil.NewNS(), testutil.NewNS()
		bus = startFirewalld(hostNS)
	})

	DescribeTable("adds the container's address as a source of the zone, checks it and removes it",
		func(backend, zone string) {
			extra := fmt.Sprintf(`, "backend": %q`, backend)
			if zone != "trusted" {
				extra += fmt.Sprintf(`, "firewalldZone": %q`, zone)
			}
			stdin := conf("1.1.0", extra, prevResult("1.1.0", "br0", "10.77.0.2/24"))
			c := testutil.Call{Command: "ADD", ContainerID: "c1", Netns: contNS.Path(), IfName: "eth0", Stdin: stdin,
				Env: map[string]string{"DBUS_SYSTEM_BUS_ADDRESS": bus}}
			run := func(cmd string) testutil.Output {
				c.Command = cmd
				return testutil.RunIn(hostNS, firewall.Plugin, c)
			}
			Expect(run("ADD").Err).To(BeNil())
			Expect(zoneSources(bus, zone)).To(Equal("10.77.0.2"))
			Expect(filterRules(hostNS)).NotTo(ContainSubstring("10.77.0.2"), "firewalld, not iptables")
			Expect(run("CHECK").Err).To(BeNil())
			Expect(run("STATUS").Err).To(BeNil())
			c.Netns = ""
			Expect(run("DEL").Err).To(BeNil())
			Expect(zoneSources(bus, zone)).To(BeEmpty())
			Expect(run("DEL").Err).To(BeNil())
			c.Netns = contNS.Path()
			out := run("CHECK")
			Expect(out.Err).NotTo(BeNil())
			Expect(out.Err.Msg+out.Err.Details).To(ContainSubstring("10.77.0.2"), "%+v", out.Err)
		},
		Entry("backend absent or empty picks firewalld when it answers", "", "trusted"),
		Entry("backend firewalld, another zone", "firewalld", "public"),
	)

	It("leaves no source behind when ADD fails after its rules step", func() {
		p := firewall.New(attachHooksFailingAt(firewall.StepRules))
		c := testutil.Call{Command: "ADD", ContainerID: "c1", Netns: contNS.Path(), IfName: "eth0",
			Stdin: conf("1.1.0", `, "backend": "firewalld"`, prevResult("1.1.0", "br0", "10.77.0.2/24")),
			Env:   map[string]string{"DBUS_SYSTEM_BUS_ADDRESS": bus}}
		Expect(testutil.RunIn(hostNS, p, c).Err).NotTo(BeNil())
		Expect(zoneSources(bus, "trusted")).To(BeEmpty())
	})
})

var _ = Describe("firewall without firewalld", func() {
	It("answers STATUS for backend firewalld with code 50, and picks iptables for an empty backend", func() {
		hostNS := testutil.NewNS()
		env := map[string]string{"DBUS_SYSTEM_BUS_ADDRESS": "unix:path=" + filepath.Join(GinkgoT().TempDir(), "no-bus")}
		out := testutil.RunIn(hostNS, firewall.Plugin, testutil.Call{Command: "STATUS", Env: env, Stdin: conf("1.1.0", `, "backend": "firewalld"`, "")})
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Code).To(BeEquivalentTo(50))
		Expect(out.Err.Msg).To(ContainSubstring(`backend: "firewalld"`))
		out = testutil.RunIn(hostNS, firewall.Plugin, testutil.Call{Command: "STATUS", Env: env, Stdin: conf("1.1.0", `, "backend": ""`, "")})
		Expect(out.Err).To(BeNil())
	})

	It("answers ADD and CHECK for backend firewalld with code 11 (try again later), not STATUS's 50, and DEL succeeds", func() {
		hostNS, contNS := testutil.NewNS(), testutil.NewNS()
		env := map[string]string{"DBUS_SYSTEM_BUS_ADDRESS": "unix:path=" + filepath.Join(GinkgoT().TempDir(), "no-bus")}
		stdin := conf("1.1.0", `, "backend": "firewalld"`, prevResult("1.1.0", "br0", "10.77.0.2/24"))
		for _, cmd := range []string{"ADD", "CHECK"} {
			out := testutil.RunIn(hostNS, firewall.Plugin, testutil.Call{Command: cmd, ContainerID: "c1", Netns: contNS.Path(), IfName: "eth0", Env: env, Stdin: stdin})
			Expect(out.Err).NotTo(BeNil(), cmd)
			Expect(out.Err.Code).To(BeEquivalentTo(types.ErrTryAgainLater), cmd+": "+out.Err.Msg)
			Expect(out.Err.Msg).To(ContainSubstring(`backend: "firewalld"`), cmd)
		}
		out := testutil.RunIn(hostNS, firewall.Plugin, testutil.Call{Command: "DEL", ContainerID: "c1", Netns: contNS.Path(), IfName: "eth0", Env: env, Stdin: stdin})
		Expect(out.Err).To(BeNil())
	})
})
