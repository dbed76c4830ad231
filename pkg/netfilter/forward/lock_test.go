package forward

import (
	"net"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/filelock"
	"github.com/cniforge/plugins/pkg/testutil"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
)

var _ = Describe("iptables forward rules without the CNI-FORWARD lock", func() {
	rules := func(id, ip string) ForwardRules {
		return ForwardRules{Owner: netfilter.Owner{Network: "net1", ContainerID: id, IfName: "eth0"}, Addrs: []net.IP{net.ParseIP(ip)}}
	}

	It("appends another attachment's rules while the lock is held, once the shared chains and jumps are in place", func(ctx SpecContext) {
		hostNS := testutil.NewNS()
		dir := GinkgoT().TempDir()
		m := &iptablesForward{ipt: &iptables.Runner{LockDir: dir}}
		first, second := rules("ctr-1", "10.1.0.5"), rules("ctr-2", "10.1.0.6")
		Expect(nftest.In(hostNS, func() error { return m.Setup(first) })).To(Succeed())

		lock, err := filelock.Lock(filepath.Join(dir, iptables.IptablesLockFile(fwdLockName)), 0o600)
		Expect(err).NotTo(HaveOccurred())
		done := make(chan error, 1)
		go func() { done <- nftest.In(hostNS, func() error { return m.Setup(second) }) }()
		select {
		case err := <-done:
			Expect(err).NotTo(HaveOccurred())
		case <-ctx.Done():
			lock.Close()
			Fail("the second Setup waited for the lock")
		}
		lock.Close()
		for _, r := range []ForwardRules{first, second} {
			Expect(nftest.In(hostNS, func() error { return m.Check(r) })).To(Succeed())
		}
	}, SpecTimeout(time.Minute))

	It("takes the lock when the shared parts are missing", func(ctx SpecContext) {
		hostNS := testutil.NewNS()
		dir := GinkgoT().TempDir()
		m := &iptablesForward{ipt: &iptables.Runner{LockDir: dir}}
		lock, err := filelock.Lock(filepath.Join(dir, iptables.IptablesLockFile(fwdLockName)), 0o600)
		Expect(err).NotTo(HaveOccurred())
		done := make(chan error, 1)
		go func() { done <- nftest.In(hostNS, func() error { return m.Setup(rules("ctr-1", "10.1.0.5")) }) }()
		Consistently(done, "300ms").ShouldNot(Receive())
		lock.Close()
		Eventually(done).WithContext(ctx).Should(Receive(BeNil()))
	}, SpecTimeout(time.Minute))
})
