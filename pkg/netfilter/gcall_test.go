package netfilter

import (
	"errors"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/testutil"
)

var _ = Describe("GCMasqAll", func() {
	a := Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
	b := Owner{Network: "net1", ContainerID: "ctr-b", IfName: "eth0"}
	c := Owner{Network: "net2", ContainerID: "ctr-c", IfName: "eth0"}
	addrsA := mustCIDRs("10.1.0.5/24", "fd00:1::5/64")
	addrsB := mustCIDRs("10.1.0.6/24")
	addrsC := mustCIDRs("10.2.0.5/24")

	It("collects the stale rules of the network from both backends", func() {
		hostNS := testutil.NewNS()
		ipt, nft := newIPTablesMasq(), newNFTablesMasq()
		for _, m := range []Masq{ipt, nft} {
			Expect(in(hostNS, func() error { return m.Setup(a, addrsA) })).To(Succeed())
			Expect(in(hostNS, func() error { return m.Setup(b, addrsB) })).To(Succeed())
			Expect(in(hostNS, func() error { return m.Setup(c, addrsC) })).To(Succeed())
		}
		Expect(in(hostNS, func() error { return GCMasqAll("net1", []Owner{b}) })).To(Succeed())
		Expect(in(hostNS, func() error { return GCMasqAll("net1", []Owner{b}) })).To(Succeed())
		for _, m := range []Masq{ipt, nft} {
			Expect(in(hostNS, func() error { return m.Check(a, addrsA) })).To(MatchError(ErrMissing), m.Backend())
			Expect(in(hostNS, func() error { return m.Check(b, addrsB) })).To(Succeed(), m.Backend())
			Expect(in(hostNS, func() error { return m.Check(c, addrsC) })).To(Succeed(), m.Backend())
		}
	})

	It("skips a backend that cannot be used and still collects the other", func() {
		hostNS := testutil.NewNS()
		nft := newNFTablesMasq()
		Expect(in(hostNS, func() error { return nft.Setup(a, addrsA) })).To(Succeed())
		// A variant whose binaries do not exist stands in for a node
		// without iptables.
		absent := &iptablesMasq{iptRunner: &iptRunner{variant: "absent"}}
		Expect(in(hostNS, func() error { return gcMasqAll("net1", nil, absent, nft) })).To(Succeed())
		Expect(in(hostNS, func() error { return nft.Check(a, addrsA) })).To(MatchError(ErrMissing))
	})

	It("reports a failure of a usable backend and still collects the other", func() {
		hostNS := testutil.NewNS()
		nft := newNFTablesMasq()
		Expect(in(hostNS, func() error { return nft.Setup(a, addrsA) })).To(Succeed())
		failing := &iptablesMasq{iptRunner: &iptRunner{variant: "nft", run: func(name string, args []string, stdin []byte) ([]byte, error) {
			if strings.HasPrefix(name, "iptables") {
				return nil, errors.New("injected failure")
			}
			return runCommand(name, args, stdin)
		}}}
		err := in(hostNS, func() error { return gcMasqAll("net1", nil, failing, nft) })
		Expect(err).To(MatchError(ContainSubstring("injected failure")))
		Expect(err).NotTo(MatchError(ErrUnavailable))
		Expect(in(hostNS, func() error { return nft.Check(a, addrsA) })).To(MatchError(ErrMissing))
	})
})
