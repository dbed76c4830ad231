package masq

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/testutil"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
)

var _ = Describe("nftables masquerade on nftables errors", func() {
	It("fails the DEL teardown when nftables refuses, and leaves the rules for the next DEL", func() {
		hostNS := testutil.NewNS()
		o := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
		addrs := mustCIDRs("10.1.0.5/24")
		m := newNFTablesMasq()
		Expect(nftest.In(hostNS, func() error { return m.Setup(o, addrs) })).To(Succeed())

		err := nftest.InWithoutNetAdmin(hostNS, func() error { return m.teardownIfUsable(o) })
		Expect(err).To(MatchError(unix.EPERM))
		Expect(nftest.In(hostNS, func() error { return m.Check(o, addrs) })).To(Succeed(), "the rules are still installed")
		err = nftest.InWithoutNetAdmin(hostNS, func() error { return m.gcIfUsable(o.Network, nil) })
		Expect(err).To(MatchError(unix.EPERM))
		Expect(nftest.In(hostNS, func() error { return m.Check(o, addrs) })).To(Succeed(), "the rules are still installed")

		Expect(nftest.In(hostNS, func() error { return m.teardownIfUsable(o) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Check(o, addrs) })).To(MatchError(netfilter.ErrMissing))
	})
})
