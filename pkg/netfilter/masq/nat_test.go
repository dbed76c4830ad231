package masq

import (
	"errors"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/testutil"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

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
