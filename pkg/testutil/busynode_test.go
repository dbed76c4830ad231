package testutil_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/testutil"
)

// busyNode keeps the node busy the way containerd does until stop is
// called: other processes make and delete network namespaces in
// /run/netns (each file empty for a moment before its namespace is bound
// to it, when `ip` cannot name it), and make mount namespaces that copy
// the mount table, the test namespaces' bind mounts included. It returns
// how many rounds each kind of noise ran, read after stop.
func busyNode() (stop func() (netnsRounds, mountRounds int64)) {
	var (
		wg          sync.WaitGroup
		quit        = make(chan struct{})
		nsN, mountN atomic.Int64
	)
	b := make([]byte, 4)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	prefix := "cniforge-noise-" + hex.EncodeToString(b) + "-"
	var errsMu sync.Mutex
	var errs []string
	fail := func(what string, err error, out []byte) {
		errsMu.Lock()
		defer errsMu.Unlock()
		errs = append(errs, fmt.Sprintf("%s: %v: %s", what, err, out))
	}
	loop := func(round func(i int)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-quit:
					return
				default:
				}
				round(i)
			}
		}()
	}
	// A namespace made by another process: the file first, then the
	// namespace bound to it (as `ip netns add` and containerd do it), a
	// moment in between, then deleted.
	loop(func(i int) {
		name := fmt.Sprintf("%s%d", prefix, i)
		p := filepath.Join(testutil.NSDir, name)
		if err := os.WriteFile(p, nil, 0o444); err != nil {
			fail("create "+p, err, nil)
			return
		}
		time.Sleep(2 * time.Millisecond)
		script := "mount --bind /proc/self/ns/net " + p + " && sleep 0.01"
		if out, err := exec.Command("unshare", "-n", "sh", "-c", script).CombinedOutput(); err != nil {
			fail("bind "+p, err, out)
		}
		if out, err := exec.Command("ip", "netns", "delete", name).CombinedOutput(); err != nil {
			fail("delete "+p, err, out)
		}
		nsN.Add(1)
	})
	// Mount namespaces that copy the mount table (the test namespaces'
	// bind mounts with it) and live a moment: one keeps the propagation,
	// one makes it private, as `unshare -m` does by default.
	for _, prop := range []string{"unchanged", "private"} {
		loop(func(int) {
			if out, err := exec.Command("unshare", "-m", "--propagation", prop, "sleep", "0.02").CombinedOutput(); err != nil {
				fail("unshare -m --propagation "+prop, err, out)
			}
			mountN.Add(1)
		})
	}
	return func() (int64, int64) {
		close(quit)
		wg.Wait()
		left, _ := filepath.Glob(filepath.Join(testutil.NSDir, prefix+"*"))
		for _, p := range left {
			_ = exec.Command("ip", "netns", "delete", filepath.Base(p)).Run() // best effort: reported below
		}
		Expect(errs).To(BeEmpty(), "the noise itself failed")
		Expect(left).To(BeEmpty(), "the noise left namespaces")
		return nsN.Load(), mountN.Load()
	}
}

var _ = Describe("on a busy node", func() {
	// issue 22: while other processes made and deleted namespaces, a spec
	// parsing `ip -o link` read "Error: Peer netns reference is invalid."
	// and one could not remove its namespace (EBUSY: a new mount namespace
	// had just copied its bind mount).
	It("makes, reads and removes namespaces, and holds IPAM ADD, while others make namespaces", func() {
		stop := busyNode()
		stopped := false
		defer func() {
			if !stopped {
				stop()
			}
		}()
		const rounds = 40
		var made []string
		for i := range rounds {
			a, removeA, err := testutil.CreateNS()
			Expect(err).NotTo(HaveOccurred(), "round %d", i)
			b, removeB, err := testutil.CreateNS()
			Expect(err).NotTo(HaveOccurred(), "round %d", i)
			made = append(made, a.Path(), b.Path())
			Expect(testutil.ConnectNS(
				testutil.VethEnd{NS: a, Name: "busy0", Addrs: []string{"10.93.0.1/24"}},
				testutil.VethEnd{NS: b, Name: "busy1", Addrs: []string{"10.93.0.2/24"}})).To(Succeed())
			Expect(testutil.LinkNames(b)).To(Equal([]string{"busy1", "lo"}), "round %d", i)
			Expect(testutil.Addrs(b, "busy1")).To(Equal([]string{"10.93.0.2/24"}))
			Expect(testutil.Routes(b)).To(ContainElement(HavePrefix("10.93.0.0/24 dev busy1")))
			Expect(testutil.IPRules(b)).NotTo(BeEmpty())

			if i%10 == 0 {
				// The probe holds its ADD while the spec reads b over netlink.
				dir := GinkgoT().TempDir()
				testutil.ProbeIPAM(dir, "10.93.0.9/24")
				out := testutil.AtIPAMAdd(dir, func() testutil.Output {
					cmd := exec.Command(filepath.Join(dir, "probe-ipam"))
					cmd.Env = append(os.Environ(), "CNI_COMMAND=ADD", "CNI_NETNS="+b.Path(), "CNI_IFNAME=busy1")
					stdout, err := cmd.Output()
					Expect(err).NotTo(HaveOccurred())
					return testutil.Output{Stdout: stdout}
				}, func() {
					l, err := testutil.Handle(b).LinkByName("busy1")
					Expect(err).NotTo(HaveOccurred())
					Expect(l.Attrs().Flags & net.FlagUp).NotTo(BeZero())
				})
				Expect(string(out.Stdout)).To(ContainSubstring("10.93.0.9/24"))
			}

			Expect(removeB()).To(Succeed(), "round %d", i)
			Expect(removeA()).To(Succeed(), "round %d", i)
		}
		nsRounds, mountRounds := stop()
		stopped = true
		Expect(nsRounds).To(BeNumerically(">", 0), "namespaces made by others meanwhile")
		Expect(mountRounds).To(BeNumerically(">", 0), "mount namespaces made meanwhile")
		for _, p := range made {
			Expect(p).NotTo(BeAnExistingFile())
		}
	})

	It("removes a namespace file that is still a mount point after the first unmount", func() {
		// What a busy node can leave for a moment: a second mount on the
		// namespace file (propagated back from a mount namespace another
		// process made), so that the unlink after one unmount answers
		// EBUSY. Cleanup unmounts and removes again until it is gone.
		n, remove, err := testutil.CreateNS()
		Expect(err).NotTo(HaveOccurred())
		p := n.Path()
		Expect(unix.Mount(p, p, "", unix.MS_BIND, "")).To(Succeed())
		Expect(remove()).To(Succeed())
		Expect(p).NotTo(BeAnExistingFile())
	})
})
