package testutil

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/onsi/ginkgo/v2"

	"github.com/cniforge/plugins/pkg/ns"
)

// StartFirewalld runs a real firewalld in hostNS (see RunFirewalld), with
// its output on GinkgoWriter, stops it when the spec ends, and returns its
// bus address. Call it from a setup node or an It.
func StartFirewalld(hostNS *ns.NetNS) string {
	ginkgo.GinkgoHelper()
	bus, stop, err := RunFirewalld(hostNS, ginkgo.GinkgoT().TempDir(), ginkgo.GinkgoWriter)
	if err != nil {
		ginkgo.Fail(err.Error())
	}
	ginkgo.DeferCleanup(stop)
	return bus
}

// RunFirewalld runs a real firewalld in hostNS (a throwaway netns) and a
// private mount namespace with a tmpfs on /run, talking to a dbus-daemon
// of its own whose socket is in dir, and returns once firewalld answers
// there. It returns the bus address (a plugin reaches firewalld through
// DBUS_SYSTEM_BUS_ADDRESS) and stop, which stops both by their PIDs and
// may run more than once. Their output goes to log. For callers outside
// Ginkgo; specs use StartFirewalld.
func RunFirewalld(hostNS *ns.NetNS, dir string, log io.Writer) (bus string, stop func(), err error) {
	for _, bin := range []string{"firewalld", "dbus-daemon", "firewall-cmd", "unshare"} {
		if _, err := exec.LookPath(bin); err != nil {
			return "", nil, fmt.Errorf("%s is needed (.ci/run installs firewalld and dbus): %w", bin, err)
		}
	}
	bus = "unix:path=" + filepath.Join(dir, "bus")
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
	cmd.Stdout, cmd.Stderr = log, log
	if err := hostNS.Do(cmd.Start); err != nil { // the child inherits hostNS
		return "", nil, fmt.Errorf("start firewalld in %s: %w", hostNS.Path(), err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }() // the shell ends with its children
	stop = func() {
		data, _ := os.ReadFile(filepath.Join(dir, "pids")) // absent: nothing started
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGTERM) // best effort: may have exited
			}
		}
		<-exited
	}
	// firewalld (Python) takes seconds to start on a busy node: a
	// deadline, not a timing assertion.
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err = FirewallCmd(bus, "--state")
		if err == nil {
			return bus, stop, nil
		}
		select {
		case <-exited:
			return "", nil, fmt.Errorf("firewalld exited before it answered: %w", err)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("firewalld did not answer on %s: %w", bus, err)
		}
	}
}

// FirewallCmd runs firewall-cmd with args against the firewalld on bus
// (firewall-cmd itself runs in the caller's netns: it only talks D-Bus)
// and returns its output, trimmed.
func FirewallCmd(bus string, args ...string) (string, error) {
	c := exec.Command("firewall-cmd", args...)
	c.Env = append(os.Environ(), "DBUS_SYSTEM_BUS_ADDRESS="+bus)
	out, err := c.CombinedOutput()
	s := strings.TrimSpace(string(out))
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return s, fmt.Errorf("firewall-cmd %s: exit %d: %s", strings.Join(args, " "), ee.ExitCode(), s)
		}
		return s, fmt.Errorf("firewall-cmd %s: %w", strings.Join(args, " "), err)
	}
	return s, nil
}
