package masq

import (
	"fmt"
	"os"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/testutil"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
)

var _ = Describe("iptables chain locks", func() {
	owner := func(i int) netfilter.Owner {
		return netfilter.Owner{Network: "net1", ContainerID: fmt.Sprintf("ctr-%d", i), IfName: "eth0"}
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
		m := &iptablesMasq{Runner: &iptables.Runner{LockDir: dir}}
		for i := range 2000 {
			unlock, err := m.LockChains(netfilter.IptablesChain(owner(i)))
			Expect(err).NotTo(HaveOccurred())
			unlock()
		}
		Expect(len(lockFiles(dir))).To(And(BeNumerically("<=", iptables.IptablesLockBuckets), BeNumerically(">", 1)))
	})

	It("lets GC collect chains that share a lock file", func(ctx SpecContext) {
		// GC locks every chain it changes at once: a bucket taken twice by
		// one process would wait for itself forever.
		hostNS := testutil.NewNS()
		dir := GinkgoT().TempDir()
		m := &iptablesMasq{Runner: &iptables.Runner{Variant: "nft", LockDir: dir}}
		a, b := owner(0), owner(1)
		for i := 2; iptables.IptablesLockFile(netfilter.IptablesChain(b)) != iptables.IptablesLockFile(netfilter.IptablesChain(a)); i++ {
			b = owner(i)
		}
		addrsA, addrsB := mustCIDRs("10.1.0.5/24"), mustCIDRs("10.1.0.6/24")
		Expect(nftest.In(hostNS, func() error { return m.Setup(a, addrsA) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Setup(b, addrsB) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.GC("net1", nil) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Check(a, addrsA) })).To(MatchError(netfilter.ErrMissing))
		Expect(nftest.In(hostNS, func() error { return m.Check(b, addrsB) })).To(MatchError(netfilter.ErrMissing))
		Expect(lockFiles(dir)).To(Equal([]string{iptables.IptablesLockFile(netfilter.IptablesChain(a))}))
	}, SpecTimeout(2*time.Minute))
})
