package masq

import (
	"fmt"
	"net"
	"os/exec"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
	"github.com/cniforge/plugins/pkg/netfilter/macspoof"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

// These load, with nft, the exact nftables state upstream's plugins make
// (its names, as issue 10 states them) and the state our earlier releases
// made, and show that our Check accepts it and our GC and Teardown remove it.
var _ = Describe("nftables state made by upstream and by our earlier releases", func() {
	o := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
	other := netfilter.Owner{Network: "net1", ContainerID: "ctr-b", IfName: "eth0"}
	addrs := mustCIDRs("10.1.0.5/24")
	mac, _ := net.ParseMAC("0a:58:0a:01:00:05")
	check := macspoof.MacSpoofCheck{Owner: o, Port: "veth1234", MAC: mac}
	var hostNS *ns.NetNS

	load := func(script string) {
		GinkgoHelper()
		Expect(nftest.In(hostNS, func() error { _, err := nftest.NftRun(script, "-f", "-"); return err })).To(Succeed())
	}
	masqScript := func(comment string) string {
		return fmt.Sprintf(`table inet cni_plugins_masquerade {
	chain masq_checks {
		ip saddr 10.1.0.5 ip daddr != 10.1.0.0/24 masquerade comment %q
	}
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		ip daddr 224.0.0.0/4 return
		ip6 daddr ff00::/8 return
		goto masq_checks
	}
}
`, comment)
	}
	upstreamMacspoof := func(o netfilter.Owner, port string) string {
		ref := o.ContainerID + "-" + o.IfName
		// Flat commands, so that the chains come in the order upstream
		// creates them (and listings compare as text).
		return fmt.Sprintf(`add table bridge nat
add chain bridge nat PREROUTING { type filter hook prerouting priority -300; policy accept; }
add chain bridge nat cni-br-iface-%[1]s
add chain bridge nat cni-br-iface-%[1]s-mac
add rule bridge nat cni-br-iface-%[1]s-mac ether saddr 0a:58:0a:01:00:05 return comment "macspoofchk-%[1]s"
add rule bridge nat cni-br-iface-%[1]s-mac drop comment "macspoofchk-%[1]s"
add rule bridge nat cni-br-iface-%[1]s iifname %[2]q jump cni-br-iface-%[1]s-mac comment "macspoofchk-%[1]s"
add rule bridge nat PREROUTING jump cni-br-iface-%[1]s comment "macspoofchk-%[1]s"
`, ref, port)
	}
	legacyMacspoof := fmt.Sprintf(`table bridge cni_plugins_macspoof {
	chain %[1]s {
		ether saddr 0a:58:0a:01:00:05 return
		drop
	}
	chain prerouting {
		type filter hook prerouting priority -300; policy accept;
		iifname "veth1234" jump %[1]s comment %[2]q
	}
}
`, macspoof.LegacyMacspoofChainName(o), netfilter.NftLegacyComment(o))
	masqRules := func() string {
		return testutil.NetfilterOutput(hostNS, "nft", "list", "chain", "inet", nftTableName, nftMasqChain)
	}
	bridgeNat := func() string {
		return testutil.NetfilterOutput(hostNS, "nft", "list", "table", "bridge", "nat")
	}

	BeforeEach(func() { hostNS = testutil.NewNS() })

	for _, form := range []struct {
		name    string
		comment func(netfilter.Owner) string
	}{{"upstream's", netfilter.NftComment}, {"our earlier", netfilter.NftLegacyComment}} {
		Context("masquerade commented in "+form.name+" form", func() {
			BeforeEach(func() { load(masqScript(form.comment(o))) })

			It("is checked, then torn down", func() {
				m := newNFTablesMasq()
				Expect(nftest.In(hostNS, func() error { return m.Check(o, addrs) })).To(Succeed())
				Expect(nftest.In(hostNS, func() error { return m.Check(other, addrs) })).To(MatchError(netfilter.ErrMissing))
				Expect(nftest.In(hostNS, func() error { return m.Teardown(other) })).To(Succeed())
				Expect(masqRules()).To(ContainSubstring("10.1.0.5"))
				Expect(nftest.In(hostNS, func() error { return TeardownMasqAll(o) })).To(Succeed())
				Expect(masqRules()).NotTo(ContainSubstring("10.1.0.5"))
				Expect(nftest.In(hostNS, func() error { return m.Check(o, addrs) })).To(MatchError(netfilter.ErrMissing))
			})

			It("is kept by a GC that lists it or covers another network, and collected by one that does not list it", func() {
				Expect(nftest.In(hostNS, func() error { return GCMasqAll("net1", []netfilter.Owner{o}) })).To(Succeed())
				Expect(nftest.In(hostNS, func() error { return GCMasqAll("net2", nil) })).To(Succeed())
				Expect(masqRules()).To(ContainSubstring("10.1.0.5"))
				Expect(nftest.In(hostNS, func() error { return GCMasqAll("net1", []netfilter.Owner{other}) })).To(Succeed())
				Expect(masqRules()).NotTo(ContainSubstring("10.1.0.5"))
			})

			It("is replaced by Setup with upstream's comment", func() {
				m := newNFTablesMasq()
				Expect(nftest.In(hostNS, func() error { return m.Setup(o, addrs) })).To(Succeed())
				Expect(masqRules()).To(ContainSubstring(fmt.Sprintf("comment %q", netfilter.NftComment(o))))
				Expect(masqRules()).NotTo(ContainSubstring(netfilter.NftLegacyHash(o)))
			})
		})
	}

	Context("mac spoof check in upstream's layout", func() {
		BeforeEach(func() { load(upstreamMacspoof(o, "veth1234")) })

		It("is what our Setup makes", func() {
			want := bridgeNat()
			other := testutil.NewNS()
			Expect(nftest.In(other, check.Setup)).To(Succeed())
			Expect(testutil.NetfilterOutput(other, "nft", "list", "table", "bridge", "nat")).To(Equal(want))
		})

		It("is checked, then torn down", func() {
			Expect(nftest.In(hostNS, check.Check)).To(Succeed())
			Expect(nftest.In(hostNS, func() error { return macspoof.TeardownMacSpoofCheck(o) })).To(Succeed())
			Expect(bridgeNat()).NotTo(ContainSubstring("macspoofchk"))
			Expect(nftest.In(hostNS, check.Check)).To(MatchError(netfilter.ErrMissing))
		})

		It("is collected by GC when its port is gone, kept when listed", func() {
			Expect(nftest.In(hostNS, func() error { return macspoof.GCMacSpoofChecks("net1", []netfilter.Owner{o}) })).To(Succeed())
			Expect(nftest.In(hostNS, check.Check)).To(Succeed())
			Expect(nftest.In(hostNS, func() error { return macspoof.GCMacSpoofChecks("net1", nil) })).To(Succeed())
			Expect(bridgeNat()).NotTo(ContainSubstring("macspoofchk"))
		})

		It("is kept by GC while its port exists, on any bridge, collected once the port is gone", func() {
			// Upstream's names carry no network and two networks may share
			// a bridge: a live port's check may be another network's.
			Expect(nftest.In(hostNS, func() error {
				return netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "veth1234"}, PeerName: "veth1234p"})
			})).To(Succeed())
			Expect(nftest.In(hostNS, func() error { return macspoof.GCMacSpoofChecks("net1", nil) })).To(Succeed())
			Expect(nftest.In(hostNS, check.Check)).To(Succeed())

			Expect(nftest.In(hostNS, func() error {
				l, err := netlink.LinkByName("veth1234")
				if err != nil {
					return err
				}
				return netlink.LinkDel(l) // and its peer: the pod is gone
			})).To(Succeed())
			Expect(nftest.In(hostNS, func() error { return macspoof.GCMacSpoofChecks("net1", nil) })).To(Succeed())
			Expect(bridgeNat()).NotTo(ContainSubstring("macspoofchk"))
		})
	})

	Context("mac spoof check in our earlier layout", func() {
		BeforeEach(func() { load(legacyMacspoof) })

		It("is checked, then torn down", func() {
			Expect(nftest.In(hostNS, check.Check)).To(Succeed())
			Expect(nftest.In(hostNS, func() error { return macspoof.TeardownMacSpoofCheck(o) })).To(Succeed())
			Expect(testutil.NetfilterOutput(hostNS, "nft", "list", "table", "bridge", macspoof.LegacyMacspoofTableName)).NotTo(ContainSubstring("jump"))
			Expect(nftest.In(hostNS, check.Check)).To(MatchError(netfilter.ErrMissing))
		})

		It("is collected by GC of its network only", func() {
			Expect(nftest.In(hostNS, func() error { return macspoof.GCMacSpoofChecks("net2", nil) })).To(Succeed())
			Expect(nftest.In(hostNS, check.Check)).To(Succeed())
			Expect(nftest.In(hostNS, func() error { return macspoof.GCMacSpoofChecks("net1", nil) })).To(Succeed())
			Expect(nftest.In(hostNS, check.Check)).To(MatchError(netfilter.ErrMissing))
		})

		It("is replaced by Setup", func() {
			Expect(nftest.In(hostNS, check.Setup)).To(Succeed())
			Expect(testutil.NetfilterOutput(hostNS, "nft", "list", "table", "bridge", macspoof.LegacyMacspoofTableName)).NotTo(ContainSubstring("jump"))
			Expect(bridgeNat()).To(ContainSubstring(macspoof.MacspoofComment(o)))
		})
	})
})

// These run the iptables commands upstream's ADD and DEL run (its argument
// order; iptables canonicalises), to show that a node can switch suites with
// attachments in place.
var _ = Describe("iptables backend next to upstream's plugins", func() {
	o := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
	addrs := mustCIDRs("10.1.0.5/24")
	chain := netfilter.IptablesChain(o)
	comment := netfilter.IptablesComment(o)
	runIPTables := func(args ...string) error {
		out, err := exec.Command("iptables-nft", append([]string{"-w", "-t", "nat"}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	upstreamAdd := func() error {
		return iptablesSteps(
			func() error { return runIPTables("-N", chain) },
			func() error {
				return runIPTables("-A", chain, "-d", "10.1.0.5/24", "-j", "ACCEPT", "-m", "comment", "--comment", comment)
			},
			func() error {
				return runIPTables("-A", chain, "!", "-d", "224.0.0.0/4", "-j", "MASQUERADE", "-m", "comment", "--comment", comment)
			},
			func() error {
				return runIPTables("-A", "POSTROUTING", "-s", "10.1.0.5", "-j", chain, "-m", "comment", "--comment", comment)
			},
		)
	}
	upstreamDel := func() error {
		return iptablesSteps(
			func() error {
				return runIPTables("-D", "POSTROUTING", "-s", "10.1.0.5", "-j", chain, "-m", "comment", "--comment", comment)
			},
			func() error { return runIPTables("-F", chain) },
			func() error { return runIPTables("-X", chain) },
		)
	}

	It("checks and tears down what upstream's ADD made", func() {
		hostNS := testutil.NewNS()
		m := &iptablesMasq{Runner: &iptables.Runner{Variant: "nft"}}
		Expect(nftest.In(hostNS, upstreamAdd)).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Check(o, addrs) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Teardown(o) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Check(o, addrs) })).To(MatchError(netfilter.ErrMissing))
		Expect(iptablesCase("nft").kernel(hostNS)).To(BeEmpty())
	})

	It("is removed by upstream's DEL", func() {
		hostNS := testutil.NewNS()
		m := &iptablesMasq{Runner: &iptables.Runner{Variant: "nft"}}
		Expect(nftest.In(hostNS, func() error { return m.Setup(o, addrs) })).To(Succeed())
		Expect(nftest.In(hostNS, upstreamDel)).To(Succeed())
		Expect(iptablesCase("nft").kernel(hostNS)).To(BeEmpty())
	})

	It("is removed by upstream's DEL when Setup wrote it over netlink", func() {
		hostNS := testutil.NewNS()
		other := netfilter.Owner{Network: "net1", ContainerID: "ctr-b", IfName: "eth0"}
		Expect(nftest.In(hostNS, func() error {
			return (&iptablesMasq{Runner: &iptables.Runner{Variant: "nft"}}).Setup(other, mustCIDRs("10.1.0.6/24"))
		})).To(Succeed())
		othersOnly := iptablesCase("nft").kernel(hostNS)
		var calls []string
		m := &iptablesMasq{Runner: nftest.Counting(&calls)}
		Expect(nftest.In(hostNS, func() error { return m.Setup(o, addrs) })).To(Succeed())
		Expect(calls).To(BeEmpty(), "written over netlink (setupNFT)")
		Expect(iptablesCase("nft").kernel(hostNS)).To(ContainSubstring(chain))
		Expect(nftest.In(hostNS, upstreamDel)).To(Succeed())
		Expect(iptablesCase("nft").kernel(hostNS)).To(Equal(othersOnly))
	})
})

func iptablesSteps(steps ...func() error) error {
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
	}
	return nil
}
