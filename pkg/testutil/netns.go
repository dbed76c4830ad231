// Package testutil is what tests share: a fresh network namespace per test
// (a stand-in host and a container, removed afterwards), the list of spec
// versions, and running a plugin in-process or as its built binary. Nothing
// here runs in the test process's own network namespace.
package testutil

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/onsi/ginkgo/v2"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/ns"
)

// NSDir is where test namespaces are bind-mounted, the folder `ip netns`
// uses, so a failing test's namespaces can be inspected with `ip netns`.
const NSDir = "/run/netns"

// NSPrefix starts the name of every namespace a test makes.
const NSPrefix = "cniforge-test-"

// NewNS makes a fresh network namespace with lo up, and registers its removal
// with Ginkgo's DeferCleanup. Call it from a setup node or an It.
func NewNS() *ns.NetNS {
	ginkgo.GinkgoHelper()
	n, cleanup, err := CreateNS()
	if err != nil {
		ginkgo.Fail(err.Error())
	}
	ginkgo.DeferCleanup(cleanup)
	return n
}

// CreateNS makes a fresh network namespace with lo up and returns it with the
// function that removes it, which may run more than once (a spec that
// removes the namespace itself also registers it with DeferCleanup). For
// callers outside Ginkgo (benchmarks) and specs that remove it mid-way.
func CreateNS() (*ns.NetNS, func() error, error) {
	if err := os.MkdirAll(NSDir, 0o755); err != nil {
		return nil, nil, err
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	p := filepath.Join(NSDir, NSPrefix+hex.EncodeToString(b))
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
	if err != nil {
		return nil, nil, fmt.Errorf("create netns file: %w", err)
	}
	f.Close()

	errc := make(chan error, 1)
	go func() {
		// The thread goes back to its namespace and to the scheduler. Left
		// to end inside the new one, it could be the main thread, which the
		// runtime never ends but wedges: /proc/<pid>/ns/net would then name
		// a test namespace for the rest of the process. If it cannot go
		// back, it stays locked and ends with this goroutine.
		runtime.LockOSThread()
		origin, err := ns.Current()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer origin.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread() // unshare failed: still in origin
			errc <- fmt.Errorf("unshare netns: %w", err)
			return
		}
		self := fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
		mountErr := unix.Mount(self, p, "none", unix.MS_BIND, "")
		if mountErr != nil {
			mountErr = fmt.Errorf("bind netns to %s: %w", p, mountErr)
		}
		if err := unix.Setns(int(origin.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(mountErr, fmt.Errorf("return to %s: %w", origin.Path(), err))
			return
		}
		runtime.UnlockOSThread()
		errc <- mountErr
	}()
	if err := <-errc; err != nil {
		os.Remove(p)
		return nil, nil, err
	}
	n, err := ns.Open(p)
	if err != nil {
		removeNSFile(p)
		return nil, nil, err
	}
	cleanup := func() error {
		n.Close()
		return removeNSFile(p)
	}
	h, err := n.Handle()
	if err == nil {
		defer h.Close()
		if lo, lerr := h.LinkByName("lo"); lerr == nil {
			err = h.LinkSetUp(lo)
		} else {
			err = lerr
		}
	}
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("set lo up in %s: %w", p, err)
	}
	return n, cleanup, nil
}

// removeNSFile unmounts the namespace file p and removes it. Another
// process on the node that makes a mount namespace at that moment (a
// container runtime, `unshare -m`) copies the bind mount into it; until
// that copy lets go, the unlink can answer EBUSY. The unmount and the
// remove are retried, with a growing pause, for at most nsRemoveBudget.
func removeNSFile(p string) error {
	deadline := time.Now().Add(nsRemoveBudget)
	pause := 2 * time.Millisecond
	for {
		err := unmountAndRemove(p)
		if err == nil || !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(pause)
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// nsRemoveBudget bounds removeNSFile's retries of a busy namespace file.
const nsRemoveBudget = 10 * time.Second

func unmountAndRemove(p string) error {
	if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", p, err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Ping sends one ICMP echo from inside n to dst with the system ping binary
// and returns its output on failure.
func Ping(n *ns.NetNS, dst string) error {
	return n.Do(func() error {
		// The child inherits this thread's namespace: os/exec forks from it.
		out, err := exec.Command("ping", "-c", "1", "-W", "2", dst).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ping %s from %s: %w\n%s", dst, n.Path(), err, out)
		}
		return nil
	})
}
