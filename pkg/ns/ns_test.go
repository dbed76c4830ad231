package ns_test

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

var _ = Describe("NetNS", func() {
	It("refuses a path that is not a network namespace", func() {
		_, err := ns.Open("/proc/self/status")
		Expect(errors.Is(err, ns.ErrNotNetNS)).To(BeTrue(), "%v", err)

		_, err = ns.Open("/proc/self/ns/uts")
		Expect(errors.Is(err, ns.ErrNotNetNS)).To(BeTrue(), "%v", err)

		_, err = ns.Open("/run/netns/does-not-exist-cniforge")
		Expect(errors.Is(err, os.ErrNotExist)).To(BeTrue(), "%v", err)
	})

	It("runs Do inside the namespace and leaves the caller's thread alone", func() {
		a := testutil.NewNS()
		b := testutil.NewNS()

		before, err := ns.Current()
		Expect(err).NotTo(HaveOccurred())
		defer before.Close()

		var inside *ns.NetNS
		Expect(a.Do(func() error {
			var err error
			inside, err = ns.Current()
			return err
		})).To(Succeed())
		defer inside.Close()
		Expect(inside.Same(a)).To(BeTrue())
		Expect(inside.Same(b)).To(BeFalse())

		after, err := ns.Current()
		Expect(err).NotTo(HaveOccurred())
		defer after.Close()
		Expect(after.Same(before)).To(BeTrue())
	})

	It("returns a panic in Do's function as an error, from the caller's namespace", func() {
		// Do runs fn on a goroutine of its own: a panic there would end
		// the process past every recover of the caller (issue 22).
		a := testutil.NewNS()
		boom := errors.New("boom")
		err := a.Do(func() error { panic(boom) })
		var pe *ns.PanicError
		Expect(errors.As(err, &pe)).To(BeTrue(), "%v", err)
		Expect(errors.Is(err, boom)).To(BeTrue())
		Expect(err.Error()).To(ContainSubstring("panic in netns " + a.Path() + ": boom"))
		Expect(string(pe.Stack)).To(ContainSubstring("ns_test.go"))

		err = a.Do(func() error { panic("not an error") })
		Expect(err).To(MatchError(ContainSubstring("not an error")))

		// The namespace is still usable, and this thread was never in it.
		Expect(a.Do(func() error { return nil })).To(Succeed())
	})

	It("returns every thread it used to the namespace it came from", func() {
		// A thread left in a test namespace and handed back to the Go
		// scheduler would run unrelated goroutines there; Do must restore
		// it or let it die. Exercise many threads at once, then look at
		// every thread of the process.
		n := testutil.NewNS()
		var wg sync.WaitGroup
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = n.Do(func() error { runtime.Gosched(); return nil })
			}()
		}
		wg.Wait()

		pid := os.Getpid()
		want, err := os.Readlink(fmt.Sprintf("/proc/%d/task/%d/ns/net", pid, pid))
		Expect(err).NotTo(HaveOccurred())
		inTest, err := os.Readlink(n.Path())
		if err != nil {
			// A bind mount of a namespace reads as a file; compare inodes.
			var st syscall.Stat_t
			Expect(syscall.Stat(n.Path(), &st)).To(Succeed())
			inTest = fmt.Sprintf("net:[%d]", st.Ino)
		}
		Expect(inTest).NotTo(Equal(want))
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		Expect(err).NotTo(HaveOccurred())
		for _, t := range tasks {
			link, err := os.Readlink(fmt.Sprintf("/proc/%d/task/%s/ns/net", pid, t.Name()))
			if errors.Is(err, os.ErrNotExist) {
				continue // the thread ended meanwhile
			}
			Expect(err).NotTo(HaveOccurred())
			Expect(link).To(Equal(want), "thread %s is in another network namespace", t.Name())
		}
	})

	It("opens the namespace of a descriptor with FromFd", func() {
		a := testutil.NewNS()
		n, err := ns.FromFd(int(a.Fd()))
		Expect(err).NotTo(HaveOccurred())
		defer n.Close()
		Expect(n.Same(a)).To(BeTrue())
		f, err := os.Open("/proc/self/status")
		Expect(err).NotTo(HaveOccurred())
		defer f.Close()
		_, err = ns.FromFd(int(f.Fd()))
		Expect(errors.Is(err, ns.ErrNotNetNS)).To(BeTrue(), "%v", err)
	})

	It("nests: Do inside Do sees the inner namespace, then the outer again", func() {
		outer := testutil.NewNS()
		inner := testutil.NewNS()
		// in returns an error naming where unless the thread is in want.
		in := func(want *ns.NetNS, where string) error {
			cur, err := ns.Current()
			if err != nil {
				return err
			}
			defer cur.Close()
			if same, _ := cur.Same(want); !same {
				return errors.New(where)
			}
			return nil
		}
		Expect(outer.Do(func() error {
			if err := inner.Do(func() error { return in(inner, "not in inner") }); err != nil {
				return err
			}
			return in(outer, "not back in outer")
		})).To(Succeed())
	})

	It("gives a netlink handle bound to the namespace", func() {
		n := testutil.NewNS()
		h, err := n.Handle()
		Expect(err).NotTo(HaveOccurred())
		defer h.Close()
		la := netlink.NewLinkAttrs()
		la.Name = "probe0"
		Expect(h.LinkAdd(&netlink.Bridge{LinkAttrs: la})).To(Succeed())

		// Visible inside n, and only there.
		Expect(n.Do(func() error {
			_, err := netlink.LinkByName("probe0")
			return err
		})).To(Succeed())
		other := testutil.NewNS()
		Expect(other.Do(func() error {
			_, err := netlink.LinkByName("probe0")
			return err
		})).To(HaveOccurred())
	})
})
