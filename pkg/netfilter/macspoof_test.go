package netfilter

import (
	"fmt"
	"net"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

// nftDeleteRuleWith deletes, with nft, the first rule of chain in the bridge
// mac spoof table whose listing contains needle.
func nftDeleteRuleWith(chain, needle string) error {
	out, err := nftRun("", "-a", "list", "chain", "bridge", macspoofTableName, chain)
	if err != nil {
		return err
	}
	for _, l := range strings.Split(out, "\n") {
		if !strings.Contains(l, needle) {
			continue
		}
		_, h, ok := strings.Cut(l, "# handle ")
		if !ok {
			continue
		}
		_, err := nftRun("", "delete", "rule", "bridge", macspoofTableName, chain, "handle", strings.TrimSpace(h))
		return err
	}
	return fmt.Errorf("no rule with %q in chain %s", needle, chain)
}

var _ = Describe("mac spoof check", func() {
	var hostNS *ns.NetNS
	o := Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
	mac, _ := net.ParseMAC("0a:58:0a:01:00:05")
	check := MacSpoofCheck{Owner: o, Port: "veth1234", MAC: mac}

	BeforeEach(func() {
		hostNS = testutil.NewNS()
		Expect(in(hostNS, check.Setup)).To(Succeed())
		Expect(in(hostNS, check.Check)).To(Succeed())
	})

	It("fails Check when the base chain's jump is gone, and Setup repairs it", func() {
		Expect(in(hostNS, func() error { return nftDeleteRuleWith(macspoofBaseChain, nftOwnerHash(o)) })).To(Succeed())
		err := in(hostNS, check.Check)
		Expect(err).To(MatchError(ErrMissing))
		Expect(err.Error()).To(ContainSubstring(`iifname "veth1234" jump ` + macspoofChainName(o)))
		Expect(in(hostNS, check.Setup)).To(Succeed())
		Expect(in(hostNS, check.Check)).To(Succeed())
	})

	It("fails Check for another port or MAC", func() {
		other := check
		other.Port = "veth9999"
		Expect(in(hostNS, other.Check)).To(MatchError(ContainSubstring(`iifname "veth9999"`)))
		other = check
		other.MAC, _ = net.ParseMAC("0a:58:0a:01:00:06")
		Expect(in(hostNS, other.Check)).To(MatchError(ContainSubstring("ether saddr 0a:58:0a:01:00:06")))
	})

	It("fails Check when the drop is gone", func() {
		Expect(in(hostNS, func() error { return nftDeleteRuleWith(macspoofChainName(o), "drop") })).To(Succeed())
		err := in(hostNS, check.Check)
		Expect(err).To(MatchError(ErrMissing))
		Expect(err.Error()).To(ContainSubstring("drop"))
	})

	It("fails Check after Teardown", func() {
		Expect(in(hostNS, func() error { return TeardownMacSpoofCheck(o) })).To(Succeed())
		Expect(in(hostNS, check.Check)).To(MatchError(ErrMissing))
		Expect(in(hostNS, func() error { return TeardownMacSpoofCheck(o) })).To(Succeed())
	})
})
