package firewall_test

import (
	"fmt"
	"os/exec"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ip"
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

var _ = Describe("firewall, nftables backend", func() {
	var hostNS, contNS, outNS *ns.NetNS
	call := func(cmd string, stdin []byte) testutil.Call {
		return testutil.Call{Command: cmd, ContainerID: "c1", Netns: contNS.Path(), IfName: "eth0", Stdin: stdin}
	}
	run := func(c testutil.Call) testutil.Output { return testutil.RunIn(hostNS, firewall.Plugin, c) }
	stdin := func(extra string) []byte {
		return conf("1.1.0", nftBackend+extra, prevResult("1.1.0", "vc", "10.77.0.2/24"))
	}

	BeforeEach(func() {
		hostNS, contNS, outNS = testutil.NewNS(), testutil.NewNS(), testutil.NewNS()
	})

	Context("with real traffic and a drop policy in another table", func() {
		BeforeEach(func() {
			Expect(testutil.ConnectNS(
				testutil.VethEnd{NS: hostNS, Name: "vc", Addrs: []string{"10.77.0.1/24"}},
				testutil.VethEnd{NS: contNS, Name: "eth0", Addrs: []string{"10.77.0.2/24"}},
			)).To(Succeed())
			Expect(testutil.ConnectNS(
				testutil.VethEnd{NS: hostNS, Name: "vo", Addrs: []string{"10.78.0.1/24"}},
				testutil.VethEnd{NS: outNS, Name: "eth0", Addrs: []string{"10.78.0.2/24"}},
			)).To(Succeed())
			Expect(defaultRoute(contNS, "10.77.0.1")).To(Succeed())
			Expect(defaultRoute(outNS, "10.78.0.1")).To(Succeed())
			Expect(hostNS.Do(func() error { return ip.SetSysctl("net/ipv4/ip_forward", "1") })).To(Succeed())
		})

		It("with iptables-nft's FORWARD policy DROP: blocked without the plugin, flows after ADD, blocked after DEL", func() {
			Expect(hostNS.Do(func() error { return exec.Command("iptables-nft", "-w", "-P", "FORWARD", "DROP").Run() })).To(Succeed())
			Expect(blocked(contNS, "10.78.0.2")).To(BeTrue(), "blocked without the plugin")
			Expect(run(call("ADD", stdin(""))).Err).To(BeNil())
			Expect(testutil.Ping(contNS, "10.78.0.2")).To(Succeed())
			Expect(testutil.NetfilterOutput(hostNS, "iptables-nft", "-S", "FORWARD")).To(ContainSubstring(
				`-A FORWARD -m mark --mark 0x1000/0x1000 -m comment --comment "CNI firewall plugin: accepted in inet cni_firewall" -j ACCEPT`))
			Expect(run(call("CHECK", stdin(""))).Err).To(BeNil())
			Expect(run(call("DEL", stdin(""))).Err).To(BeNil())
			Expect(blocked(contNS, "10.78.0.2")).To(BeTrue(), "blocked after DEL")
		})

		It("with an admin's inet filter forward policy drop and the README's delegation rule: the same", func() {
			Expect(nftIn(hostNS, "add table inet filter; add chain inet filter forward { type filter hook forward priority filter; policy drop; }; "+
				"add rule inet filter forward meta mark & 0x00000100 == 0x00000100 accept")).To(Succeed())
			Expect(blocked(contNS, "10.78.0.2")).To(BeTrue(), "blocked without the plugin")
			Expect(run(call("ADD", stdin(`, "nftablesMarkBit": 8`))).Err).To(BeNil())
			Expect(testutil.Ping(contNS, "10.78.0.2")).To(Succeed())
			Expect(run(call("DEL", stdin(`, "nftablesMarkBit": 8`))).Err).To(BeNil())
			Expect(blocked(contNS, "10.78.0.2")).To(BeTrue(), "blocked after DEL")
			Expect(ruleset(hostNS)).To(ContainSubstring("table inet filter"), "the admin's table is not ours to change")
		})

		It("lets the admin chain's verdict win: its drop over our accept, its accept over the other table's drop policy", func() {
			Expect(hostNS.Do(func() error { return exec.Command("iptables-nft", "-w", "-P", "FORWARD", "DROP").Run() })).To(Succeed())
			Expect(run(call("ADD", stdin(""))).Err).To(BeNil())
			Expect(testutil.Ping(contNS, "10.78.0.2")).To(Succeed())
			// A new connection from outside is not ours to accept...
			Expect(blocked(outNS, "10.77.0.2")).To(BeTrue())
			// ...but the admin's accept carries the mark past FORWARD DROP.
			Expect(nftIn(hostNS, "add", "rule", "inet", "cni_firewall", "admin", "ip", "saddr", "10.78.0.2", "accept")).To(Succeed())
			Expect(testutil.Ping(outNS, "10.77.0.2")).To(Succeed())
			Expect(nftIn(hostNS, "add", "rule", "inet", "cni_firewall", "admin", "ip", "saddr", "10.77.0.2", "drop")).To(Succeed())
			Expect(blocked(contNS, "10.78.0.2")).To(BeTrue(), "the admin's drop wins over our accept")
			Expect(run(call("DEL", stdin(""))).Err).To(BeNil())
			Expect(ruleset(hostNS)).To(ContainSubstring("ip saddr 10.77.0.2 drop"), "the admin's rules stay")
		})
	})

	DescribeTable("ADD, CHECK, DEL, DEL in every spec version", func(ver string) {
		in := conf(ver, nftBackend, prevResult(ver, "br0", "10.77.0.2/24"))
		out := run(call("ADD", in))
		Expect(out.Err).To(BeNil())
		res := testutil.ParseResult(ver, out.Stdout)
		Expect(res.IPs).To(HaveLen(1))
		Expect(res.IPs[0].Address.String()).To(Equal("10.77.0.2/24"))
		Expect(ruleset(hostNS)).To(ContainSubstring(`ip saddr 10.77.0.2 meta mark set meta mark | 0x00001000 accept comment "`))
		Expect(filterRules(hostNS)).NotTo(ContainSubstring("10.77.0.2"), "no iptables rule")
		if testutil.AtLeast(ver, "0.4.0") {
			Expect(run(call("CHECK", in)).Err).To(BeNil())
		}
		del := call("DEL", in)
		Expect(run(del).Err).To(BeNil())
		Expect(ruleset(hostNS)).NotTo(ContainSubstring("10.77.0.2"))
		// DEL from the cached prevResult with CNI_NETNS empty, a second time.
		del.Netns = ""
		Expect(run(del).Err).To(BeNil())
		if testutil.AtLeast(ver, "0.4.0") {
			out := run(call("CHECK", in))
			Expect(out.Err).NotTo(BeNil())
			Expect(out.Err.Msg).To(ContainSubstring("ip saddr 10.77.0.2"))
		}
	}, testutil.VersionEntries())

	It("fails CHECK when any one rule is missing, naming it", func() {
		in := conf("1.1.0", nftBackend+`, "ingressPolicy": "isolated"`, prevResult("1.1.0", "br0", "10.77.0.2/24"))
		for _, tc := range []struct{ remove, named string }{
			{"delete rule inet cni_firewall allow handle %d", "ip daddr 10.77.0.2 ct state established,related"},
			{"delete rule inet cni_firewall isolation_out handle %d", `oifname "br0" drop`},
			{"delete rule inet cni_firewall forward handle %d", "the base chain's rules"},
			{"delete chain inet cni_firewall admin", "chain admin"},
		} {
			Expect(run(call("ADD", in)).Err).To(BeNil())
			Expect(run(call("CHECK", in)).Err).To(BeNil())
			cmd := tc.remove
			if strings.Contains(cmd, "%d") {
				cmd = fmt.Sprintf(cmd, firstHandle(hostNS, strings.Fields(cmd)[4]))
			} else {
				Expect(nftIn(hostNS, "delete rule inet cni_firewall forward handle "+fmt.Sprint(handleOf(hostNS, "forward", "jump admin")))).To(Succeed())
			}
			Expect(nftIn(hostNS, cmd)).To(Succeed())
			out := run(call("CHECK", in))
			Expect(out.Err).NotTo(BeNil(), tc.remove)
			Expect(out.Err.Msg).To(ContainSubstring(tc.named))
			Expect(run(call("ADD", in)).Err).To(BeNil(), "ADD repairs")
			Expect(run(call("CHECK", in)).Err).To(BeNil())
		}
	})

	It("collects the rules of attachments GC does not list, and keeps the listed ones", func() {
		Expect(run(call("ADD", conf("1.1.0", nftBackend, prevResult("1.1.0", "br0", "10.77.0.2/24")))).Err).To(BeNil())
		c2 := call("ADD", conf("1.1.0", nftBackend, prevResult("1.1.0", "br0", "10.77.0.3/24")))
		c2.ContainerID = "c2"
		Expect(run(c2).Err).To(BeNil())
		gc := testutil.Call{Command: "GC", Stdin: conf("1.1.0", nftBackend+`, "cni.dev/valid-attachments": [{"containerID": "c2", "ifname": "eth0"}]`, "")}
		Expect(run(gc).Err).To(BeNil())
		rules := ruleset(hostNS)
		Expect(rules).NotTo(ContainSubstring("10.77.0.2"))
		Expect(rules).To(ContainSubstring("10.77.0.3"))
	})

	It("refuses a bad nftablesMarkBit with its code and creates nothing", func() {
		prev := prevResult("1.1.0", "br0", "10.77.0.2/24")
		for _, tc := range []struct {
			extra string
			code  uint
		}{
			{`, "nftablesMarkBit": 32`, types.ErrInvalidNetworkConfig},
			{`, "nftablesMarkBit": -1`, types.ErrInvalidNetworkConfig},
			{`, "nftablesMarkBit": "12"`, types.ErrDecodingFailure},
		} {
			out := run(call("ADD", conf("1.1.0", nftBackend+tc.extra, prev)))
			Expect(out.Err).NotTo(BeNil(), tc.extra)
			Expect(out.Err.Code).To(BeEquivalentTo(tc.code), tc.extra+": "+out.Err.Msg)
			Expect(out.Err.Msg).To(ContainSubstring("nftablesMarkBit"))
		}
		Expect(ruleset(hostNS)).NotTo(ContainSubstring("cni_firewall"))
	})

	DescribeTable("leaves no rule behind when ADD fails after a step", func(step string) {
		p := firewall.New(attachHooksFailingAt(step))
		out := testutil.RunIn(hostNS, p, call("ADD", conf("1.1.0", nftBackend+`, "ingressPolicy": "isolated"`, prevResult("1.1.0", "br0", "10.77.0.2/24"))))
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Msg).To(ContainSubstring("injected after " + step))
		Expect(ruleset(hostNS)).NotTo(ContainSubstring("10.77.0.2"))
	}, Entry("resolve", firewall.StepResolve), Entry("rules", firewall.StepRules))

	It("answers STATUS", func() {
		Expect(run(testutil.Call{Command: "STATUS", Stdin: conf("1.1.0", nftBackend, "")}).Err).To(BeNil())
	})
})

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
