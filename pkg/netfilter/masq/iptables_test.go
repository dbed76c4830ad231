package masq

import (
	"errors"
	"fmt"
	"os"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
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

// Issue 8's last note: iptables DEL and GC skipped any failure whenever
// the nat-table check failed too, whatever the cause. Only a kernel
// without the table (or without nf_tables) means "nothing installed".
var _ = Describe("iptables masquerade DEL and GC when the nat-table check fails too", func() {
	o := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
	addrs := mustCIDRs("10.1.0.5/24")
	const (
		lockBusy = "Another app is currently holding the xtables lock. Perhaps you want to use the -w option?"
		denied   = "iptables v1.8.9 (nf_tables): Could not fetch rule set generation id: Permission denied (you must be root)"
		absent   = "iptables v1.8.9 (legacy): can't initialize iptables table `nat': Table does not exist (do you need to insmod?)"
	)
	var hostNS = testutil.NewNS
	// failing is the iptables backend whose iptables-save and -restore
	// fail (as when the lock stays busy), and whose nat-table check fails
	// with probeMsg.
	failing := func(probeMsg string) *iptablesMasq {
		m := newIPTablesMasq()
		m.Run = func(name string, args []string, stdin []byte) ([]byte, error) {
			return nil, errors.New(name + ": exit status 4: " + lockBusy)
		}
		m.NatProbe = func(nftnl.Family) error { return errors.New(probeMsg) }
		// The tools are what fails here: no netlink teardown beside them.
		m.NoNFT = true
		return m
	}

	It("reports both failures, and leaves the rules for the next DEL", func() {
		n := hostNS()
		m := newIPTablesMasq()
		Expect(nftest.In(n, func() error { return m.Setup(o, addrs) })).To(Succeed())

		err := nftest.In(n, func() error { return failing(denied).teardownIfUsable(o) })
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(And(ContainSubstring(lockBusy), ContainSubstring("Permission denied")))
		Expect(errors.Is(err, netfilter.ErrUnavailable)).To(BeFalse())
		err = nftest.In(n, func() error { return failing(denied).gcIfUsable(o.Network, nil) })
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(And(ContainSubstring(lockBusy), ContainSubstring("Permission denied")))
		Expect(nftest.In(n, func() error { return m.Check(o, addrs) })).To(Succeed(), "the rules are still installed")

		Expect(nftest.In(n, func() error { return m.teardownIfUsable(o) })).To(Succeed())
		Expect(nftest.In(n, func() error { return m.Check(o, addrs) })).To(MatchError(netfilter.ErrMissing))
	})

	It("counts a kernel without the nat table as nothing installed", func() {
		n := hostNS()
		Expect(nftest.In(n, func() error { return failing(absent).teardownIfUsable(o) })).To(Succeed())
		Expect(nftest.In(n, func() error { return failing(absent).gcIfUsable(o.Network, nil) })).To(Succeed())
	})

	It("probes the nat table with the iptables tool of each family", func() {
		n := hostNS()
		m := newIPTablesMasq()
		Expect(nftest.In(n, func() error { return m.NatUsable(nftnl.IPv4) })).To(Succeed())
		Expect(nftest.In(n, func() error { return m.NatUsable(nftnl.IPv6) })).To(Succeed())
		m.Variant = "nosuchvariant"
		err := nftest.In(n, func() error { return m.NatUsable(nftnl.IPv4) })
		Expect(err).To(MatchError(netfilter.ErrUnavailable))
		Expect(err.Error()).To(ContainSubstring("iptables-nosuchvariant"))
	})

	It("counts exit status 1 (no such rule) as usable, and keeps what iptables said otherwise", func() {
		exitWith := func(code int, msg string) *iptablesMasq {
			m := newIPTablesMasq()
			m.Run = func(name string, args []string, stdin []byte) ([]byte, error) {
				Expect(args).To(Equal([]string{"-w", "-t", "nat", "-S", "POSTROUTING", "1"}))
				return iptables.RunCommand("sh", []string{"-c", `echo "$1" >&2; exit "$2"`, "sh", msg, fmt.Sprint(code)}, nil)
			}
			return m
		}
		Expect(exitWith(1, "iptables: Bad rule (does a matching rule exist in that chain?).").NatUsable(nftnl.IPv4)).To(Succeed())
		err := exitWith(3, absent).NatUsable(nftnl.IPv4)
		Expect(err).To(MatchError(netfilter.ErrUnavailable))
		Expect(err.Error()).To(ContainSubstring("Table does not exist"))
		err = exitWith(4, lockBusy).NatUsable(nftnl.IPv4)
		Expect(err).To(HaveOccurred())
		Expect(errors.Is(err, netfilter.ErrUnavailable)).To(BeFalse(), "a busy lock says nothing about the kernel")
		Expect(err.Error()).To(ContainSubstring("xtables lock"))
		// exit 4 is never "absent", whatever the text says
		Expect(exitWith(4, absent).NatUsable(nftnl.IPv4)).NotTo(MatchError(netfilter.ErrUnavailable))
	})

	DescribeTable("natAbsent", func(msg string, want bool) {
		Expect(iptables.NatAbsent(errors.New(msg))).To(Equal(want), msg)
	},
		Entry("legacy, no table", absent, true),
		Entry("nft, no nf_tables", "iptables v1.8.9 (nf_tables): Failed to initialize nft: Protocol not supported", true),
		Entry("permission", denied, false),
		Entry("lock", lockBusy, false),
		Entry("killed", "signal: killed", false),
	)
})

// A prestarted iptables-nft-restore must carry exactly what Setup would
// write with a restore of its own, and, unused, be killed without having
// changed the kernel.
var _ = Describe("iptables-nft restore started before the addresses", func() {
	o := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
	nft := iptablesCase("nft")

	// setupTwins runs Setup(o, addrs) in two fresh namespaces, with a
	// prestarted restore and without one, and returns the backend that
	// had it and the first namespace.
	setupTwins := func(addrs ...string) (*iptablesMasq, *ns.NetNS) {
		GinkgoHelper()
		pre, plain := testutil.NewNS(), testutil.NewNS()
		m := &iptablesMasq{Runner: &iptables.Runner{Variant: "nft"}}
		Expect(nftest.In(pre, func() error { m.Prestart(); return nil })).To(Succeed())
		Expect(m.Prestarted).NotTo(BeNil(), "iptables-nft-restore started")
		Expect(nftest.In(pre, func() error { return m.Setup(o, mustCIDRs(addrs...)) })).To(Succeed())
		Expect(nftest.In(plain, func() error {
			return (&iptablesMasq{Runner: &iptables.Runner{Variant: "nft"}}).Setup(o, mustCIDRs(addrs...))
		})).To(Succeed())
		Expect(nft.kernel(pre)).To(Equal(nft.kernel(plain)))
		Expect(nft.kernel(pre)).To(ContainSubstring(netfilter.IptablesChain(o)))
		return m, pre
	}

	It("feeds Setup's IPv4 rules to the prestarted process", func() {
		m, _ := setupTwins("10.1.0.5/24", "fd00:1::5/64")
		Expect(m.Prestarted).To(BeNil(), "Setup took it")
	})

	It("leaves it to Release when Setup has no IPv4 address, and Release ends it", func() {
		m, n := setupTwins("fd00:1::5/64")
		p := m.Prestarted
		Expect(p).NotTo(BeNil(), "an IPv6 Setup does not take the IPv4 restore")
		before := nft.kernel(n)
		m.Release()
		Expect(p.Proc.Exited()).To(BeTrue(), "the process was reaped")
		Expect(nft.kernel(n)).To(Equal(before))
		m.Release() // twice: nothing left to end
	})

	It("changes nothing when released unused (killed before it read anything)", func() {
		n := testutil.NewNS()
		m := &iptablesMasq{Runner: &iptables.Runner{Variant: "nft"}}
		Expect(nftest.In(n, func() error { m.Prestart(); return nil })).To(Succeed())
		p := m.Prestarted
		Expect(p).NotTo(BeNil())
		m.Release()
		Expect(p.Proc.Exited()).To(BeTrue())
		Expect(testutil.NetfilterOutput(n, "nft", "list", "ruleset")).To(BeEmpty())
	})

	It("is what the default backend prestarts, and its Setup takes it", func() {
		n := testutil.NewNS()
		var m netfilter.Masq
		Expect(nftest.In(n, func() (err error) { m, err = NewMasq(""); return })).To(Succeed())
		auto, ok := m.(*autoMasq)
		Expect(ok).To(BeTrue(), "with iptables usable (.ci/run installs it), the default is iptables falling back to nftables")
		auto.ipt.Variant = "nft"
		Expect(nftest.In(n, func() error { m.(netfilter.Prestarter).Prestart(); return nil })).To(Succeed())
		Expect(auto.ipt.Prestarted).NotTo(BeNil())
		Expect(nftest.In(n, func() error { return m.Setup(o, mustCIDRs("10.1.0.5/24")) })).To(Succeed())
		Expect(auto.ipt.Prestarted).To(BeNil(), "Setup took it")
		Expect(nft.kernel(n)).To(ContainSubstring(netfilter.IptablesChain(o)))
		m.(netfilter.Prestarter).Release()
	})

	It("starts nothing for legacy iptables, whose restore may lock before it reads", func() {
		m := &iptablesMasq{Runner: &iptables.Runner{Variant: "legacy"}}
		Expect(nftest.In(testutil.NewNS(), func() error { m.Prestart(); return nil })).To(Succeed())
		Expect(m.Prestarted).To(BeNil())
	})
})
