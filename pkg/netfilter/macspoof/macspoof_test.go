package macspoof

import (
	"fmt"
	"net"
	"strings"

	"github.com/google/nftables"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
)

// nftDeleteRuleWith deletes, with nft, the first rule of chain in the bridge
// mac spoof table whose listing contains needle.
func nftDeleteRuleWith(chain, needle string) error {
	return nftest.DeleteRuleWith("bridge", macspoofTableName, chain, needle)
}

// ctrACheck is ctr-a's spoof check: veth1234 may send from
// 0a:58:0a:01:00:05 only.
func ctrACheck() MacSpoofCheck {
	mac, _ := net.ParseMAC("0a:58:0a:01:00:05")
	return MacSpoofCheck{Owner: netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}, Port: "veth1234", MAC: mac}
}

// setUpIn returns a fresh namespace in which check is set up.
func setUpIn(check MacSpoofCheck) *ns.NetNS {
	GinkgoHelper()
	n := testutil.NewNS()
	Expect(nftest.In(n, check.Setup)).To(Succeed())
	return n
}

var _ = Describe("mac spoof check", func() {
	var hostNS *ns.NetNS
	check := ctrACheck()
	o := check.Owner

	BeforeEach(func() {
		hostNS = setUpIn(check)
		Expect(nftest.In(hostNS, check.Check)).To(Succeed())
	})

	It("fails Check when the base chain's jump is gone, and Setup repairs it", func() {
		Expect(nftest.In(hostNS, func() error { return nftDeleteRuleWith(macspoofBaseChain, "jump "+MacspoofChainName(o)) })).To(Succeed())
		err := nftest.In(hostNS, check.Check)
		Expect(err).To(MatchError(netfilter.ErrMissing))
		Expect(err.Error()).To(ContainSubstring("chain PREROUTING: jump " + MacspoofChainName(o)))
		Expect(nftest.In(hostNS, check.Setup)).To(Succeed())
		Expect(nftest.In(hostNS, check.Check)).To(Succeed())
	})

	It("fails Check for another port or MAC", func() {
		other := check
		other.Port = "veth9999"
		Expect(nftest.In(hostNS, other.Check)).To(MatchError(ContainSubstring(`iifname "veth9999"`)))
		other = check
		other.MAC, _ = net.ParseMAC("0a:58:0a:01:00:06")
		Expect(nftest.In(hostNS, other.Check)).To(MatchError(ContainSubstring("ether saddr 0a:58:0a:01:00:06")))
	})

	It("fails Check when the drop is gone", func() {
		Expect(nftest.In(hostNS, func() error { return nftDeleteRuleWith(macspoofMACChainName(o), "drop") })).To(Succeed())
		err := nftest.In(hostNS, check.Check)
		Expect(err).To(MatchError(netfilter.ErrMissing))
		Expect(err.Error()).To(ContainSubstring("drop"))
	})

	DescribeTable("fails Check when the base chain is no filter chain on prerouting",
		func(from, to string) {
			// The same table, as nft lists it, with the base chain moved.
			listing := testutil.NetfilterOutput(hostNS, "nft", "list", "table", "bridge", macspoofTableName)
			Expect(listing).To(ContainSubstring(from))
			other := testutil.NewNS()
			Expect(nftest.In(other, func() error { _, err := nftest.NftRun(strings.Replace(listing, from, to, 1), "-f", "-"); return err })).To(Succeed())
			err := nftest.In(other, check.Check)
			Expect(err).To(MatchError(netfilter.ErrMissing))
			Expect(err.Error()).To(ContainSubstring("chain " + macspoofBaseChain + " as a filter prerouting chain"))
		},
		Entry("on the forward hook", "hook prerouting priority dstnat;", "hook forward priority -300;"),
		Entry("a regular chain", "type filter hook prerouting priority dstnat; policy accept;", ""),
	)

	It("fails Check after Teardown", func() {
		Expect(nftest.In(hostNS, func() error { return TeardownMacSpoofCheck(o) })).To(Succeed())
		Expect(nftest.In(hostNS, check.Check)).To(MatchError(netfilter.ErrMissing))
		Expect(nftest.In(hostNS, func() error { return TeardownMacSpoofCheck(o) })).To(Succeed())
	})
})

var _ = Describe("mac spoof check on nftables errors", func() {
	// issue 8, defect 9: any nftables error used to count as "nothing
	// installed", so a DEL reported success while the rules stayed.
	var hostNS *ns.NetNS
	check := ctrACheck()
	o := check.Owner

	BeforeEach(func() { hostNS = setUpIn(check) })

	It("fails Teardown when nftables refuses, and leaves the check for the next DEL", func() {
		err := nftest.InWithoutNetAdmin(hostNS, func() error { return TeardownMacSpoofCheck(o) })
		Expect(err).To(MatchError(unix.EPERM))
		Expect(err.Error()).To(ContainSubstring(macspoofTableName))
		Expect(nftest.In(hostNS, check.Check)).To(Succeed(), "the check is still installed")

		Expect(nftest.In(hostNS, func() error { return TeardownMacSpoofCheck(o) })).To(Succeed())
		Expect(nftest.In(hostNS, check.Check)).To(MatchError(netfilter.ErrMissing))
	})

	It("fails GC when nftables refuses", func() {
		err := nftest.InWithoutNetAdmin(hostNS, func() error { return GCMacSpoofChecks(o.Network, nil) })
		Expect(err).To(MatchError(unix.EPERM))
		Expect(nftest.In(hostNS, check.Check)).To(Succeed(), "the check is still installed")

		Expect(nftest.In(hostNS, func() error { return GCMacSpoofChecks(o.Network, nil) })).To(Succeed())
		Expect(nftest.In(hostNS, check.Check)).To(MatchError(netfilter.ErrMissing))
	})

	It("tears down from many DELs at once, each succeeding", func() {
		// Concurrent teardowns of one owner race: the loser's batch finds
		// its rule or chain gone (ENOENT), which is "already gone".
		for round := range 5 {
			errs := make(chan error, 8)
			for range 8 {
				go func() { errs <- nftest.In(hostNS, func() error { return TeardownMacSpoofCheck(o) }) }()
			}
			for range 8 {
				Expect(<-errs).To(Succeed(), "round %d", round)
			}
			Expect(nftest.In(hostNS, check.Check)).To(MatchError(netfilter.ErrMissing))
			Expect(nftest.In(hostNS, check.Setup)).To(Succeed())
		}
	})

	It("tears down nothing, successfully, where nothing was set up", func() {
		other := testutil.NewNS()
		Expect(nftest.In(other, func() error { return TeardownMacSpoofCheck(o) })).To(Succeed())
		Expect(nftest.In(other, func() error { return GCMacSpoofChecks(o.Network, nil) })).To(Succeed())
	})
})

var _ = Describe("mac spoof check over a host's own bridge nat PREROUTING", func() {
	// issue 22, defect 3: a jump from a base chain on another hook, type or
	// priority would leave the check silently ineffective.
	o := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
	mac, _ := net.ParseMAC("0a:58:0a:01:00:05")
	check := MacSpoofCheck{Owner: o, Port: "veth1234", MAC: mac}

	DescribeTable("fails Setup, changing nothing, when the base chain is not upstream's",
		func(chain, have string) {
			hostNS := testutil.NewNS()
			script := "table bridge nat {\n chain PREROUTING {\n" + chain + "\n }\n}\n"
			Expect(nftest.In(hostNS, func() error { _, err := nftest.NftRun(script, "-f", "-"); return err })).To(Succeed())
			before := testutil.NetfilterOutput(hostNS, "nft", "list", "ruleset")
			err := nftest.In(hostNS, check.Setup)
			Expect(err).To(MatchError(ErrBaseChainConflict))
			Expect(err.Error()).To(ContainSubstring(fmt.Sprintf("table bridge nat chain PREROUTING is %q, not %q", have, "type filter hook prerouting priority -300")))
			Expect(testutil.NetfilterOutput(hostNS, "nft", "list", "ruleset")).To(Equal(before))
			Expect(nftest.In(hostNS, check.Check)).To(MatchError(netfilter.ErrMissing))
		},
		Entry("hooked on input", "type filter hook input priority -300; policy accept;", "type filter hook input priority -300"),
		Entry("on prerouting at priority 0", "type filter hook prerouting priority 0; policy accept;", "type filter hook prerouting priority 0"),
		Entry("a regular chain", "", "a regular chain (no hook)"),
	)

	It("sets up over upstream's base chain made by nft", func() {
		hostNS := testutil.NewNS()
		script := "table bridge nat {\n chain PREROUTING {\n type filter hook prerouting priority -300; policy accept;\n }\n}\n"
		Expect(nftest.In(hostNS, func() error { _, err := nftest.NftRun(script, "-f", "-"); return err })).To(Succeed())
		Expect(nftest.In(hostNS, check.Setup)).To(Succeed())
		Expect(nftest.In(hostNS, check.Check)).To(Succeed())
	})
})

var _ = Describe("GC of mac spoof checks in our earlier layout", func() {
	// A release before the switch to upstream's names kept each check in
	// table bridge cni_plugins_macspoof: a jump from prerouting, commented
	// with its owner, to a chain of the attachment's own. GC must take
	// that chain too, not only the jump: nothing else ever would.
	a := ctrACheck().Owner
	b := netfilter.Owner{Network: "net1", ContainerID: "ctr-b", IfName: "eth0"}
	var hostNS *ns.NetNS

	legacy := func(o netfilter.Owner, port, mac string) string {
		return fmt.Sprintf(`add chain bridge cni_plugins_macspoof %[1]s
add rule bridge cni_plugins_macspoof %[1]s ether saddr %[3]s return
add rule bridge cni_plugins_macspoof %[1]s drop
add rule bridge cni_plugins_macspoof prerouting iifname %[2]q jump %[1]s comment %[4]q
`, LegacyMacspoofChainName(o), port, mac, netfilter.NftLegacyComment(o))
	}

	// legacyTable reads table bridge cni_plugins_macspoof in hostNS over
	// netlink: each chain's name with the number of its rules.
	legacyTable := func() map[string]int {
		GinkgoHelper()
		c, err := nftables.New(nftables.WithNetNSFd(int(hostNS.Fd())))
		Expect(err).NotTo(HaveOccurred())
		chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyBridge)
		Expect(err).NotTo(HaveOccurred())
		out := map[string]int{}
		for _, ch := range chains {
			if ch.Table.Name != LegacyMacspoofTableName {
				continue
			}
			rules, err := c.GetRules(ch.Table, ch)
			Expect(err).NotTo(HaveOccurred())
			out[ch.Name] = len(rules)
		}
		return out
	}

	BeforeEach(func() {
		hostNS = testutil.NewNS()
		script := "add table bridge cni_plugins_macspoof\n" +
			"add chain bridge cni_plugins_macspoof prerouting { type filter hook prerouting priority -300; policy accept; }\n" +
			legacy(a, "veth1234", "0a:58:0a:01:00:05") + legacy(b, "veth5678", "0a:58:0a:01:00:06")
		Expect(nftest.In(hostNS, func() error { _, err := nftest.NftRun(script, "-f", "-"); return err })).To(Succeed())
		Expect(legacyTable()).To(Equal(map[string]int{
			"prerouting": 2, LegacyMacspoofChainName(a): 2, LegacyMacspoofChainName(b): 2,
		}))
	})

	It("deletes the chain of each owner not kept with its jump, and keeps a kept one's chain and rules", func() {
		Expect(nftest.In(hostNS, func() error { return GCMacSpoofChecks("net1", []netfilter.Owner{a}) })).To(Succeed())
		Expect(legacyTable()).To(Equal(map[string]int{"prerouting": 1, LegacyMacspoofChainName(a): 2}))
		Expect(nftest.In(hostNS, ctrACheck().Check)).To(Succeed())

		Expect(nftest.In(hostNS, func() error { return GCMacSpoofChecks("net1", nil) })).To(Succeed())
		Expect(legacyTable()).To(Equal(map[string]int{"prerouting": 0}))
	})
})
