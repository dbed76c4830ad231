package masq

import (
	"errors"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/testutil"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
)

var _ = Describe("GCMasqAll", func() {
	a := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
	b := netfilter.Owner{Network: "net1", ContainerID: "ctr-b", IfName: "eth0"}
	c := netfilter.Owner{Network: "net2", ContainerID: "ctr-c", IfName: "eth0"}
	addrsA := mustCIDRs("10.1.0.5/24", "fd00:1::5/64")
	addrsB := mustCIDRs("10.1.0.6/24")
	addrsC := mustCIDRs("10.2.0.5/24")

	It("collects the stale rules of the network from both backends", func() {
		hostNS := testutil.NewNS()
		ipt, nft := newIPTablesMasq(), newNFTablesMasq()
		for _, m := range []netfilter.Masq{ipt, nft} {
			Expect(nftest.In(hostNS, func() error { return m.Setup(a, addrsA) })).To(Succeed())
			Expect(nftest.In(hostNS, func() error { return m.Setup(b, addrsB) })).To(Succeed())
			Expect(nftest.In(hostNS, func() error { return m.Setup(c, addrsC) })).To(Succeed())
		}
		Expect(nftest.In(hostNS, func() error { return GCMasqAll("net1", []netfilter.Owner{b}) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return GCMasqAll("net1", []netfilter.Owner{b}) })).To(Succeed())
		for _, m := range []netfilter.Masq{ipt, nft} {
			Expect(nftest.In(hostNS, func() error { return m.Check(a, addrsA) })).To(MatchError(netfilter.ErrMissing), m.Backend())
			Expect(nftest.In(hostNS, func() error { return m.Check(b, addrsB) })).To(Succeed(), m.Backend())
			Expect(nftest.In(hostNS, func() error { return m.Check(c, addrsC) })).To(Succeed(), m.Backend())
		}
	})

	It("skips a backend that cannot be used and still collects the other", func() {
		hostNS := testutil.NewNS()
		nft := newNFTablesMasq()
		Expect(nftest.In(hostNS, func() error { return nft.Setup(a, addrsA) })).To(Succeed())
		// A variant whose binaries do not exist stands in for a node
		// without iptables.
		absent := &iptablesMasq{Runner: &iptables.Runner{Variant: "absent"}}
		Expect(nftest.In(hostNS, func() error { return gcMasqAll("net1", nil, absent, nft) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return nft.Check(a, addrsA) })).To(MatchError(netfilter.ErrMissing))
	})

	It("reports a failure of a usable backend and still collects the other", func() {
		hostNS := testutil.NewNS()
		nft := newNFTablesMasq()
		Expect(nftest.In(hostNS, func() error { return nft.Setup(a, addrsA) })).To(Succeed())
		failing := &iptablesMasq{Runner: &iptables.Runner{Variant: "nft", Run: func(name string, args []string, stdin []byte) ([]byte, error) {
			if strings.HasPrefix(name, "iptables") {
				return nil, errors.New("injected failure")
			}
			return iptables.RunCommand(name, args, stdin)
		}}}
		err := nftest.In(hostNS, func() error { return gcMasqAll("net1", nil, failing, nft) })
		Expect(err).To(MatchError(ContainSubstring("injected failure")))
		Expect(err).NotTo(MatchError(netfilter.ErrUnavailable))
		Expect(nftest.In(hostNS, func() error { return nft.Check(a, addrsA) })).To(MatchError(netfilter.ErrMissing))
	})
})
