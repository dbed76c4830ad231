package ip_test

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

// dropSysAdmin takes CAP_SYS_ADMIN out of the calling thread's effective
// set (capabilities are per thread), so that the thread can no longer
// setns(). The caller's goroutine must stay locked to the thread for good:
// the thread then ends with the goroutine and never runs anything else.
func dropSysAdmin() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	data[unix.CAP_SYS_ADMIN/32].Effective &^= 1 << (unix.CAP_SYS_ADMIN % 32)
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// onThreadWithoutSetns runs fn on a thread of its own that cannot switch
// namespaces, after checking that it indeed cannot, and returns fn's error.
func onThreadWithoutSetns(target *ns.NetNS, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with us
		if err := dropSysAdmin(); err != nil {
			errc <- err
			return
		}
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); !errors.Is(err, unix.EPERM) {
			errc <- fmt.Errorf("setns without CAP_SYS_ADMIN: got %v, want EPERM: the test cannot tell", err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// threadsOutside lists the threads of this process whose network namespace
// is not want's (readlink form, "net:[4026531992]").
func threadsOutside(want string) []string {
	GinkgoHelper()
	pid := os.Getpid()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, t := range tasks {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/task/%s/ns/net", pid, t.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread ended meanwhile
		}
		Expect(err).NotTo(HaveOccurred())
		if link != want {
			out = append(out, t.Name()+" in "+link)
		}
	}
	return out
}

var _ = Describe("waiting for kernel events", func() {
	var n *ns.NetNS
	var h *netlink.Handle

	BeforeEach(func() {
		n = testutil.NewNS()
		h = testutil.Handle(n)
	})

	// A link that is in n: lo (always index 1).
	const lo = 1
	always := func(netlink.Link) bool { return true }

	It("never switches the calling thread's namespace", func() {
		// issue 8, defect 7: netlink's NewHandleAt and subscriptions with a
		// Namespace setns() the calling thread (a plugin's main thread) and
		// ignore a failed switch back. The waits must make their sockets
		// on threads of their own, so they work from a thread that cannot
		// switch at all.
		Expect(onThreadWithoutSetns(n, func() error {
			l, err := ip.WaitLink(int(n.Fd()), lo, always, 5*time.Second)
			if err != nil {
				return err
			}
			if l.Attrs().Name != "lo" {
				return fmt.Errorf("WaitLink returned %q, want lo of the test namespace", l.Attrs().Name)
			}
			return nil
		})).To(Succeed())
		Expect(onThreadWithoutSetns(n, func() error {
			return ip.WaitAddrsSettled(int(n.Fd()), lo, 5*time.Second)
		})).To(Succeed())
	})

	It("returns every thread to the namespace it came from after many waits at once", func() {
		pid := os.Getpid()
		want, err := os.Readlink(fmt.Sprintf("/proc/%d/task/%d/ns/net", pid, pid))
		Expect(err).NotTo(HaveOccurred())
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for range 32 {
			wg.Add(2)
			go func() {
				defer wg.Done()
				_, err := ip.WaitLink(int(n.Fd()), lo, always, 5*time.Second)
				errs <- err
			}()
			go func() {
				defer wg.Done()
				errs <- ip.WaitAddrsSettled(int(n.Fd()), lo, 5*time.Second)
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(threadsOutside(want)).To(BeEmpty())
	})

	It("wakes on an event of the link in the namespace it was given", func() {
		// The subscription must live in n: one in the caller's namespace
		// would never see the change and run into the deadline.
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "wait1"}, PeerName: "wait2"}
		Expect(h.LinkAdd(veth)).To(Succeed())
		l, err := h.LinkByName("wait1")
		Expect(err).NotTo(HaveOccurred())

		waiting := make(chan struct{})
		var once sync.Once
		cond := func(l netlink.Link) bool {
			// First called after the subscription and the first read.
			once.Do(func() { close(waiting) })
			return l.Attrs().RawFlags&unix.IFF_UP != 0
		}
		type res struct {
			l   netlink.Link
			err error
		}
		done := make(chan res, 1)
		go func() {
			l, err := ip.WaitLink(int(n.Fd()), l.Attrs().Index, cond, 20*time.Second)
			done <- res{l, err}
		}()
		<-waiting
		Expect(h.LinkSetUp(l)).To(Succeed())
		r := <-done
		Expect(r.err).NotTo(HaveOccurred())
		Expect(r.l.Attrs().RawFlags & unix.IFF_UP).NotTo(BeZero())
	})
})
