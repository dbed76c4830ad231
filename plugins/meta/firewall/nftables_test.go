package firewall_test

import (
	"fmt"
	"os/exec"
	"regexp"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/meta/firewall"
)

// nftIn runs nft with args in n.
func nftIn(n *ns.NetNS, args ...string) error {
	return n.Do(func() error {
		out, err := exec.Command("nft", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("nft %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	})
}

func ruleset(n *ns.NetNS) string { return testutil.NetfilterOutput(n, "nft", "list", "ruleset") }

// blocked reports whether one ping from n to dst goes unanswered within a
// second (a blocked ping costs the whole wait, so it is kept short).
func blocked(n *ns.NetNS, dst string) bool {
	return n.Do(func() error { return exec.Command("ping", "-c", "1", "-W", "1", dst).Run() }) != nil
}

const nftBackend = `, "backend": "nftables"`

// nftables is the backend that talks netlink: rules in table inet
// cni_firewall, accepted packets marked for another table's policy.
var nftables = backend{
	key: nftBackend, rules: ruleset, saddr: "ip saddr %s",
	added:     `ip saddr 10.77.0.2 meta mark set meta mark | 0x00001000 accept comment "`,
	untouched: filterRules,
	drift: func(n *ns.NetNS) {
		GinkgoHelper()
		re := regexp.MustCompile(`ip daddr 10\.77\.0\.2 .* # handle (\d+)`)
		m := re.FindStringSubmatch(testutil.NetfilterOutput(n, "nft", "-a", "list", "chain", "inet", "cni_firewall", "allow"))
		Expect(m).NotTo(BeNil())
		Expect(nftIn(n, "delete", "rule", "inet", "cni_firewall", "allow", "handle", m[1])).To(Succeed())
	},
	traffic:      "with real traffic and a drop policy in another table",
	trafficSpecs: nftablesTraffic,
	own:          nftablesOwn,
}

func nftablesTraffic(e *fwEnv) {
	stdin := func(extra string) []byte {
		return conf("1.1.0", nftBackend+extra, prevResult("1.1.0", "vc", "10.77.0.2/24"))
	}

	It("with iptables-nft's FORWARD policy DROP: blocked without the plugin, flows after ADD, blocked after DEL", func() {
		Expect(e.hostNS.Do(func() error { return exec.Command("iptables-nft", "-w", "-P", "FORWARD", "DROP").Run() })).To(Succeed())
		Expect(blocked(e.contNS, "10.78.0.2")).To(BeTrue(), "blocked without the plugin")
		Expect(e.run(e.call("ADD", stdin(""))).Err).To(BeNil())
		Expect(testutil.Ping(e.contNS, "10.78.0.2")).To(Succeed())
		Expect(testutil.NetfilterOutput(e.hostNS, "iptables-nft", "-S", "FORWARD")).To(ContainSubstring(
			`-A FORWARD -m mark --mark 0x1000/0x1000 -m comment --comment "CNI firewall plugin: accepted in inet cni_firewall" -j ACCEPT`))
		Expect(e.run(e.call("CHECK", stdin(""))).Err).To(BeNil())
		Expect(e.run(e.call("DEL", stdin(""))).Err).To(BeNil())
		Expect(blocked(e.contNS, "10.78.0.2")).To(BeTrue(), "blocked after DEL")
	})

	It("keeps the container's traffic flowing when a repeated ADD fails after its rules step", func() {
		Expect(e.hostNS.Do(func() error { return exec.Command("iptables-nft", "-w", "-P", "FORWARD", "DROP").Run() })).To(Succeed())
		Expect(e.run(e.call("ADD", stdin(""))).Err).To(BeNil())
		Expect(testutil.Ping(e.contNS, "10.78.0.2")).To(Succeed())
		Expect(testutil.RunIn(e.hostNS, firewall.New(attachHooksFailingAt(firewall.StepRules)), e.call("ADD", stdin(""))).Err).NotTo(BeNil())
		Expect(testutil.Ping(e.contNS, "10.78.0.2")).To(Succeed(), "the pod's accept rules stay")
	})

	It("with an admin's inet filter forward policy drop and the README's delegation rule: the same", func() {
		Expect(nftIn(e.hostNS, "add table inet filter; add chain inet filter forward { type filter hook forward priority filter; policy drop; }; "+
			"add rule inet filter forward meta mark & 0x00000100 == 0x00000100 accept")).To(Succeed())
		Expect(blocked(e.contNS, "10.78.0.2")).To(BeTrue(), "blocked without the plugin")
		Expect(e.run(e.call("ADD", stdin(`, "nftablesMarkBit": 8`))).Err).To(BeNil())
		Expect(testutil.Ping(e.contNS, "10.78.0.2")).To(Succeed())
		Expect(e.run(e.call("DEL", stdin(`, "nftablesMarkBit": 8`))).Err).To(BeNil())
		Expect(blocked(e.contNS, "10.78.0.2")).To(BeTrue(), "blocked after DEL")
		Expect(ruleset(e.hostNS)).To(ContainSubstring("table inet filter"), "the admin's table is not ours to change")
	})

	It("lets the admin chain's verdict win: its drop over our accept, its accept over the other table's drop policy", func() {
		Expect(e.hostNS.Do(func() error { return exec.Command("iptables-nft", "-w", "-P", "FORWARD", "DROP").Run() })).To(Succeed())
		Expect(e.run(e.call("ADD", stdin(""))).Err).To(BeNil())
		Expect(testutil.Ping(e.contNS, "10.78.0.2")).To(Succeed())
		// A new connection from outside is not ours to accept...
		Expect(blocked(e.outNS, "10.77.0.2")).To(BeTrue())
		// ...but the admin's accept carries the mark past FORWARD DROP.
		Expect(nftIn(e.hostNS, "add", "rule", "inet", "cni_firewall", "admin", "ip", "saddr", "10.78.0.2", "accept")).To(Succeed())
		Expect(testutil.Ping(e.outNS, "10.77.0.2")).To(Succeed())
		Expect(nftIn(e.hostNS, "add", "rule", "inet", "cni_firewall", "admin", "ip", "saddr", "10.77.0.2", "drop")).To(Succeed())
		Expect(blocked(e.contNS, "10.78.0.2")).To(BeTrue(), "the admin's drop wins over our accept")
		Expect(e.run(e.call("DEL", stdin(""))).Err).To(BeNil())
		Expect(ruleset(e.hostNS)).To(ContainSubstring("ip saddr 10.77.0.2 drop"), "the admin's rules stay")
	})
}

func nftablesOwn(e *fwEnv) {
	It("fails CHECK when any one rule is missing, naming it", func() {
		in := conf("1.1.0", nftBackend+`, "ingressPolicy": "isolated"`, prevResult("1.1.0", "br0", "10.77.0.2/24"))
		for _, tc := range []struct{ remove, named string }{
			{"delete rule inet cni_firewall allow handle %d", "ip daddr 10.77.0.2 ct state established,related"},
			{"delete rule inet cni_firewall isolation_out handle %d", `oifname "br0" drop`},
			{"delete rule inet cni_firewall forward handle %d", "the base chain's rules"},
			{"delete chain inet cni_firewall admin", "chain admin"},
		} {
			Expect(e.run(e.call("ADD", in)).Err).To(BeNil())
			Expect(e.run(e.call("CHECK", in)).Err).To(BeNil())
			cmd := tc.remove
			if strings.Contains(cmd, "%d") {
				cmd = fmt.Sprintf(cmd, firstHandle(e.hostNS, strings.Fields(cmd)[4]))
			} else {
				Expect(nftIn(e.hostNS, "delete rule inet cni_firewall forward handle "+fmt.Sprint(handleOf(e.hostNS, "forward", "jump admin")))).To(Succeed())
			}
			Expect(nftIn(e.hostNS, cmd)).To(Succeed())
			out := e.run(e.call("CHECK", in))
			Expect(out.Err).NotTo(BeNil(), tc.remove)
			Expect(out.Err.Msg).To(ContainSubstring(tc.named))
			Expect(e.run(e.call("ADD", in)).Err).To(BeNil(), "ADD repairs")
			Expect(e.run(e.call("CHECK", in)).Err).To(BeNil())
		}
	})

	It("refuses a bad nftablesMarkBit with its code and creates nothing", func() {
		prev := prevResult("1.1.0", "br0", "10.77.0.2/24")
		for _, tc := range []struct {
			extra string
			code  uint
		}{
			{`, "nftablesMarkBit": 32`, types.ErrInvalidNetworkConfig},
			{`, "nftablesMarkBit": -1`, types.ErrInvalidNetworkConfig},
			{`, "nftablesMarkBit": "12"`, types.ErrInvalidNetworkConfig},
		} {
			out := e.run(e.call("ADD", conf("1.1.0", nftBackend+tc.extra, prev)))
			Expect(out.Err).NotTo(BeNil(), tc.extra)
			Expect(out.Err.Code).To(BeEquivalentTo(tc.code), tc.extra+": "+out.Err.Msg)
			Expect(out.Err.Msg).To(ContainSubstring("nftablesMarkBit"))
		}
		Expect(ruleset(e.hostNS)).NotTo(ContainSubstring("cni_firewall"))
	})
}

// handleOf returns the handle of the first rule of chain in inet
// cni_firewall whose text contains s.
func handleOf(n *ns.NetNS, chain, s string) int {
	GinkgoHelper()
	out := testutil.NetfilterOutput(n, "nft", "-a", "list", "chain", "inet", "cni_firewall", chain)
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, s) && strings.Contains(l, "# handle ") && !strings.Contains(l, "{") {
			var h int
			_, err := fmt.Sscanf(l[strings.LastIndex(l, "# handle ")+len("# handle "):], "%d", &h)
			Expect(err).NotTo(HaveOccurred())
			return h
		}
	}
	Fail(fmt.Sprintf("no rule with %q in chain %s:\n%s", s, chain, out))
	return 0
}

// firstHandle returns the handle of the first rule of chain.
func firstHandle(n *ns.NetNS, chain string) int {
	GinkgoHelper()
	return handleOf(n, chain, " ")
}
