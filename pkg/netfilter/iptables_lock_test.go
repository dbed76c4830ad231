package netfilter

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/filelock"
	"github.com/cniforge/plugins/pkg/testutil"
)

var _ = Describe("iptables chain locks", func() {
	owner := func(i int) Owner {
		return Owner{Network: "net1", ContainerID: fmt.Sprintf("ctr-%d", i), IfName: "eth0"}
	}
	lockFiles := func(dir string) []string {
		GinkgoHelper()
		entries, err := os.ReadDir(dir)
		Expect(err).NotTo(HaveOccurred())
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}

	It("keep at most 256 lock files, however many chains come and go", func() {
		// issue 8: one file per (network, container), never removed, made
		// the directory grow by one file per attachment forever.
		dir := GinkgoT().TempDir()
		m := &iptablesMasq{iptRunner: &iptRunner{lockDir: dir}}
		for i := range 2000 {
			unlock, err := m.lockChains(iptablesChain(owner(i)))
			Expect(err).NotTo(HaveOccurred())
			unlock()
		}
		Expect(len(lockFiles(dir))).To(And(BeNumerically("<=", iptablesLockBuckets), BeNumerically(">", 1)))
	})

	It("lets GC collect chains that share a lock file", func(ctx SpecContext) {
		// GC locks every chain it changes at once: a bucket taken twice by
		// one process would wait for itself forever.
		hostNS := testutil.NewNS()
		dir := GinkgoT().TempDir()
		m := &iptablesMasq{iptRunner: &iptRunner{variant: "nft", lockDir: dir}}
		a, b := owner(0), owner(1)
		for i := 2; iptablesLockFile(iptablesChain(b)) != iptablesLockFile(iptablesChain(a)); i++ {
			b = owner(i)
		}
		addrsA, addrsB := mustCIDRs("10.1.0.5/24"), mustCIDRs("10.1.0.6/24")
		Expect(in(hostNS, func() error { return m.Setup(a, addrsA) })).To(Succeed())
		Expect(in(hostNS, func() error { return m.Setup(b, addrsB) })).To(Succeed())
		Expect(in(hostNS, func() error { return m.GC("net1", nil) })).To(Succeed())
		Expect(in(hostNS, func() error { return m.Check(a, addrsA) })).To(MatchError(ErrMissing))
		Expect(in(hostNS, func() error { return m.Check(b, addrsB) })).To(MatchError(ErrMissing))
		Expect(lockFiles(dir)).To(Equal([]string{iptablesLockFile(iptablesChain(a))}))
	}, SpecTimeout(2*time.Minute))
})

var _ = Describe("iptables forward rules without the CNI-FORWARD lock", func() {
	rules := func(id, ip string) ForwardRules {
		return ForwardRules{Owner: Owner{Network: "net1", ContainerID: id, IfName: "eth0"}, Addrs: []net.IP{net.ParseIP(ip)}}
	}

	It("appends another attachment's rules while the lock is held, once the shared chains and jumps are in place", func(ctx SpecContext) {
		hostNS := testutil.NewNS()
		dir := GinkgoT().TempDir()
		m := &iptablesForward{ipt: &iptRunner{lockDir: dir}}
		first, second := rules("ctr-1", "10.1.0.5"), rules("ctr-2", "10.1.0.6")
		Expect(in(hostNS, func() error { return m.Setup(first) })).To(Succeed())

		lock, err := filelock.Lock(filepath.Join(dir, iptablesLockFile(fwdLockName)), 0o600)
		Expect(err).NotTo(HaveOccurred())
		done := make(chan error, 1)
		go func() { done <- in(hostNS, func() error { return m.Setup(second) }) }()
		select {
		case err := <-done:
			Expect(err).NotTo(HaveOccurred())
		case <-ctx.Done():
			lock.Close()
			Fail("the second Setup waited for the lock")
		}
		lock.Close()
		for _, r := range []ForwardRules{first, second} {
			Expect(in(hostNS, func() error { return m.Check(r) })).To(Succeed())
		}
	}, SpecTimeout(time.Minute))

	It("takes the lock when the shared parts are missing", func(ctx SpecContext) {
		hostNS := testutil.NewNS()
		dir := GinkgoT().TempDir()
		m := &iptablesForward{ipt: &iptRunner{lockDir: dir}}
		lock, err := filelock.Lock(filepath.Join(dir, iptablesLockFile(fwdLockName)), 0o600)
		Expect(err).NotTo(HaveOccurred())
		done := make(chan error, 1)
		go func() { done <- in(hostNS, func() error { return m.Setup(rules("ctr-1", "10.1.0.5")) }) }()
		Consistently(done, "300ms").ShouldNot(Receive())
		lock.Close()
		Eventually(done).WithContext(ctx).Should(Receive(BeNil()))
	}, SpecTimeout(time.Minute))
})
