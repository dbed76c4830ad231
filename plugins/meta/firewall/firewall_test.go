package firewall_test

import (
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/meta/firewall"
)

const netName = "fwnet"

// prevResult as bridge reports it: the bridge (no sandbox), the host veth,
// the container interface, one address.
func prevResult(ver, br, addr string) string {
	if !testutil.AtLeast(ver, "0.3.0") {
		return fmt.Sprintf(`{"cniVersion": %q, "ip4": {"ip": %q}}`, ver, addr)
	}
	return fmt.Sprintf(`{"cniVersion": %q, "interfaces": [{"name": %q}, {"name": "veth0"}, {"name": "eth0", "sandbox": "/x"}],
		"ips": [{"address": %q, "interface": 2}]}`, ver, br, addr)
}

func conf(ver, extra, prev string) []byte {
	s := fmt.Sprintf(`{"cniVersion": %q, "name": %q, "type": "firewall"%s`, ver, netName, extra)
	if prev != "" {
		s += `, "prevResult": ` + prev
	}
	return []byte(s + "}")
}

func iptablesIn(n *ns.NetNS, args ...string) error {
	return n.Do(func() error {
		out, err := exec.Command("iptables", append([]string{"-w"}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	})
}

// ruleState is the filter table and the nftables ruleset with handles,
// without comments and counters (which time and traffic move).
func ruleState(n *ns.NetNS) string {
	GinkgoHelper()
	var b strings.Builder
	for _, l := range strings.Split(filterRules(n)+testutil.NetfilterOutput(n, "nft", "-a", "list", "ruleset"), "\n") {
		if !strings.HasPrefix(l, "#") {
			b.WriteString(counterRE.ReplaceAllString(l, "") + "\n")
		}
	}
	return b.String()
}

var counterRE = regexp.MustCompile(`\[\d+:\d+\]|counter packets \d+ bytes \d+`)

func filterRules(n *ns.NetNS) string {
	return testutil.NetfilterOutput(n, "iptables-save", "-t", "filter")
}

// fwEnv is the world of one spec: a stand-in host, the container and a
// namespace outside, made afresh before each spec.
type fwEnv struct{ hostNS, contNS, outNS *ns.NetNS }

func (e *fwEnv) call(cmd string, stdin []byte) testutil.Call {
	return testutil.Call{Command: cmd, ContainerID: "c1", Netns: e.contNS.Path(), IfName: "eth0", Stdin: stdin}
}

func (e *fwEnv) run(c testutil.Call) testutil.Output {
	GinkgoHelper()
	return testutil.RunIn(e.hostNS, firewall.Plugin, c)
}

// backend is what the specs both netfilter backends share need to know
// of one; each backend's own specs come with it.
type backend struct {
	// key is the config's keys that pick it, as conf's extra.
	key string
	// rules is the dump its rules show in; saddr how a rule of it matches
	// a source address (a format); added the accept rule ADD makes for
	// 10.77.0.2 of c1, as rules shows it.
	rules        func(*ns.NetNS) string
	saddr, added string
	// untouched, when set, is a dump that must not name the container.
	untouched func(*ns.NetNS) string
	// drift removes the RELATED,ESTABLISHED rule ADD made for 10.77.0.2
	// of c1 (check --repair's case).
	drift func(*ns.NetNS)
	// statusWithoutPath is STATUS's code when PATH holds no binaries (0:
	// it answers).
	statusWithoutPath int
	// traffic is the Context text of the backend's specs with real
	// traffic (the container at 10.77.0.2 behind vc, the outside at
	// 10.78.0.2 behind vo, the host forwarding); trafficSpecs registers
	// them, own the backend's other specs.
	traffic      string
	trafficSpecs func(e *fwEnv)
	own          func(e *fwEnv)
}

var _ = DescribeTableSubtree("firewall", func(b backend) {
	e := &fwEnv{}
	BeforeEach(func() {
		e.hostNS, e.contNS, e.outNS = testutil.NewNS(), testutil.NewNS(), testutil.NewNS()
	})
	prev := func(ver, addr string) string { return prevResult(ver, "br0", addr) }

	Context(b.traffic, func() {
		BeforeEach(func() {
			Expect(testutil.ConnectNS(
				testutil.VethEnd{NS: e.hostNS, Name: "vc", Addrs: []string{"10.77.0.1/24"}},
				testutil.VethEnd{NS: e.contNS, Name: "eth0", Addrs: []string{"10.77.0.2/24"}},
			)).To(Succeed())
			Expect(testutil.ConnectNS(
				testutil.VethEnd{NS: e.hostNS, Name: "vo", Addrs: []string{"10.78.0.1/24"}},
				testutil.VethEnd{NS: e.outNS, Name: "eth0", Addrs: []string{"10.78.0.2/24"}},
			)).To(Succeed())
			Expect(defaultRoute(e.contNS, "10.77.0.1")).To(Succeed())
			Expect(defaultRoute(e.outNS, "10.78.0.1")).To(Succeed())
			Expect(e.hostNS.Do(func() error { return ip.SetSysctl("net/ipv4/ip_forward", "1") })).To(Succeed())
		})
		b.trafficSpecs(e)
	})

	DescribeTable("ADD, CHECK, DEL, DEL in every spec version", func(ver string) {
		stdin := conf(ver, b.key, prev(ver, "10.77.0.2/24"))
		out := e.run(e.call("ADD", stdin))
		Expect(out.Err).To(BeNil())
		res := testutil.ParseResult(ver, out.Stdout)
		Expect(res.IPs).To(HaveLen(1))
		Expect(res.IPs[0].Address.String()).To(Equal("10.77.0.2/24"))
		Expect(b.rules(e.hostNS)).To(ContainSubstring(b.added))
		if b.untouched != nil {
			Expect(b.untouched(e.hostNS)).NotTo(ContainSubstring("10.77.0.2"), "no rule of the other backend")
		}
		if testutil.AtLeast(ver, "0.4.0") {
			Expect(e.run(e.call("CHECK", stdin)).Err).To(BeNil())
		}
		del := e.call("DEL", stdin)
		Expect(e.run(del).Err).To(BeNil())
		Expect(b.rules(e.hostNS)).NotTo(ContainSubstring("10.77.0.2"))
		// DEL from the cached prevResult with CNI_NETNS empty, a second time.
		del.Netns = ""
		Expect(e.run(del).Err).To(BeNil())
		if testutil.AtLeast(ver, "0.4.0") {
			out := e.run(e.call("CHECK", stdin))
			Expect(out.Err).NotTo(BeNil())
			Expect(out.Err.Msg).To(ContainSubstring(fmt.Sprintf(b.saddr, "10.77.0.2")))
		}
	}, testutil.VersionEntries())

	// A config edited between ADD and DEL must not make the attachment
	// impossible to remove; upstream's DEL succeeds too (issue 22).
	DescribeTable("DEL removes the rules with a config that no longer validates", func(edited string) {
		Expect(e.run(e.call("ADD", conf("1.1.0", b.key, prev("1.1.0", "10.77.0.2/24")))).Err).To(BeNil())
		Expect(b.rules(e.hostNS)).To(ContainSubstring(b.added))
		stdin := conf("1.1.0", edited, prev("1.1.0", "10.77.0.2/24"))
		Expect(e.run(e.call("ADD", stdin)).Err).To(HaveField("Code", BeEquivalentTo(types.ErrInvalidNetworkConfig)), "ADD still refuses it")
		Expect(e.run(e.call("DEL", stdin)).Err).To(BeNil())
		Expect(b.rules(e.hostNS)).NotTo(ContainSubstring("10.77.0.2"))
		Expect(e.run(e.call("DEL", stdin)).Err).To(BeNil())
	},
		Entry("an unknown ingress policy", b.key+`, "ingressPolicy": "closed"`),
		Entry("an admin chain name with a space", b.key+`, "iptablesAdminChainName": "CNI ADMIN"`),
	)

	It("collects the rules of attachments GC does not list, and keeps the listed ones", func() {
		Expect(e.run(e.call("ADD", conf("1.1.0", b.key, prev("1.1.0", "10.77.0.2/24")))).Err).To(BeNil())
		c2 := e.call("ADD", conf("1.1.0", b.key, prev("1.1.0", "10.77.0.3/24")))
		c2.ContainerID = "c2"
		Expect(e.run(c2).Err).To(BeNil())
		gc := testutil.Call{Command: "GC", Stdin: conf("1.1.0", b.key+`, "cni.dev/valid-attachments": [{"containerID": "c2", "ifname": "eth0"}]`, "")}
		Expect(e.run(gc).Err).To(BeNil())
		rules := b.rules(e.hostNS)
		Expect(rules).NotTo(ContainSubstring("10.77.0.2"))
		Expect(rules).To(ContainSubstring(fmt.Sprintf(b.saddr, "10.77.0.3")))
	})

	DescribeTable("leaves no rule behind when ADD fails after a step", func(step string) {
		p := firewall.New(attachHooksFailingAt(step))
		out := testutil.RunIn(e.hostNS, p, e.call("ADD", conf("1.1.0", b.key+`, "ingressPolicy": "isolated"`, prev("1.1.0", "10.77.0.2/24"))))
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Msg).To(ContainSubstring("injected after " + step))
		Expect(b.rules(e.hostNS)).NotTo(ContainSubstring("10.77.0.2"))
	}, Entry("resolve", firewall.StepResolve), Entry("rules", firewall.StepRules))

	// check --repair and a runtime's second ADD land on a live
	// attachment: a failure later in that ADD must not take the running
	// pod's allow rules away (its undo used to remove every rule of the
	// owner).
	It("keeps a live attachment's rules when a repeated ADD fails after its rules step", func() {
		stdin := conf("1.1.0", b.key, prev("1.1.0", "10.77.0.2/24"))
		Expect(e.run(e.call("ADD", stdin)).Err).To(BeNil())
		before := ruleState(e.hostNS)
		Expect(before).To(ContainSubstring(b.added))

		out := testutil.RunIn(e.hostNS, firewall.New(attachHooksFailingAt(firewall.StepRules)), e.call("ADD", stdin))
		Expect(out.Err).NotTo(BeNil())
		Expect(ruleState(e.hostNS)).To(Equal(before), "every rule the first ADD made is still there, same handles")
		Expect(e.run(e.call("CHECK", stdin)).Err).To(BeNil())
	})

	It("keeps what drift left when a repair ADD fails late: the rules that were there stay", func() {
		stdin := conf("1.1.0", b.key, prev("1.1.0", "10.77.0.2/24"))
		Expect(e.run(e.call("ADD", stdin)).Err).To(BeNil())
		b.drift(e.hostNS)
		drifted := ruleState(e.hostNS)
		Expect(drifted).To(ContainSubstring(b.added))
		Expect(e.run(e.call("CHECK", stdin)).Err).NotTo(BeNil(), "drift CHECK sees")

		out := testutil.RunIn(e.hostNS, firewall.New(attachHooksFailingAt(firewall.StepRules)), e.call("ADD", stdin))
		Expect(out.Err).NotTo(BeNil())
		Expect(ruleState(e.hostNS)).To(Equal(drifted), "the rules that were there stay, the missing one stays missing")
	})

	It("answers STATUS", func() {
		Expect(e.run(testutil.Call{Command: "STATUS", Stdin: conf("1.1.0", b.key, "")}).Err).To(BeNil())
		out := e.run(testutil.Call{Command: "STATUS", Stdin: conf("1.1.0", b.key, ""), Env: map[string]string{"PATH": GinkgoT().TempDir()}})
		if b.statusWithoutPath == 0 {
			Expect(out.Err).To(BeNil(), "without binaries in PATH")
			return
		}
		testutil.ExpectCode(out, b.statusWithoutPath)
	})

	b.own(e)
}, Entry("iptables", iptables), Entry("nftables", nftables))

// iptables is the default backend: rules in iptables' filter table.
var iptables = backend{
	rules: filterRules, saddr: "-s %s/32",
	added: `-A CNI-FORWARD -s 10.77.0.2/32 -m comment --comment "name: \"fwnet\" id: \"c1\" if: 65746830" -j ACCEPT`,
	drift: func(n *ns.NetNS) {
		GinkgoHelper()
		Expect(iptablesIn(n, "-D", "CNI-FORWARD", "-d", "10.77.0.2/32", "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED",
			"-m", "comment", "--comment", `name: "fwnet" id: "c1" if: 65746830`, "-j", "ACCEPT")).To(Succeed())
	},
	statusWithoutPath: 50,
	traffic:           "with real traffic, FORWARD policy DROP in the stand-in host",
	trafficSpecs:      iptablesTraffic,
	own:               iptablesOwn,
}

func iptablesTraffic(e *fwEnv) {
	BeforeEach(func() {
		Expect(iptablesIn(e.hostNS, "-P", "FORWARD", "DROP")).To(Succeed())
		Expect(testutil.Ping(e.contNS, "10.78.0.2")).NotTo(Succeed(), "blocked without the plugin")
	})

	It("lets the container out after ADD, and not after DEL", func() {
		stdin := conf("1.1.0", "", prevResult("1.1.0", "vc", "10.77.0.2/24"))
		Expect(e.run(e.call("ADD", stdin)).Err).To(BeNil())
		Expect(testutil.Ping(e.contNS, "10.78.0.2")).To(Succeed())
		Expect(e.run(e.call("CHECK", stdin)).Err).To(BeNil())
		Expect(e.run(e.call("DEL", stdin)).Err).To(BeNil())
		Expect(testutil.Ping(e.contNS, "10.78.0.2")).NotTo(Succeed())
	})

	It("keeps the container's traffic flowing when a repeated ADD fails after its rules step", func() {
		stdin := conf("1.1.0", "", prevResult("1.1.0", "vc", "10.77.0.2/24"))
		Expect(e.run(e.call("ADD", stdin)).Err).To(BeNil())
		Expect(testutil.Ping(e.contNS, "10.78.0.2")).To(Succeed())
		Expect(testutil.RunIn(e.hostNS, firewall.New(attachHooksFailingAt(firewall.StepRules)), e.call("ADD", stdin)).Err).NotTo(BeNil())
		Expect(testutil.Ping(e.contNS, "10.78.0.2")).To(Succeed(), "the pod's ACCEPT rules stay")
	})

	It("lets the admin chain's verdict win", func() {
		stdin := conf("1.1.0", `, "iptablesAdminChainName": "MY-ADMIN"`, prevResult("1.1.0", "vc", "10.77.0.2/24"))
		Expect(e.run(e.call("ADD", stdin)).Err).To(BeNil())
		Expect(testutil.Ping(e.contNS, "10.78.0.2")).To(Succeed())
		Expect(iptablesIn(e.hostNS, "-A", "MY-ADMIN", "-s", "10.77.0.2/32", "-j", "DROP")).To(Succeed())
		Expect(testutil.Ping(e.contNS, "10.78.0.2")).NotTo(Succeed())
		Expect(e.run(e.call("DEL", stdin)).Err).To(BeNil())
		Expect(filterRules(e.hostNS)).To(ContainSubstring("-A MY-ADMIN -s 10.77.0.2/32 -j DROP"), "the admin's rules stay")
	})

	It("removes, on DEL from the cached prevResult with CNI_NETNS empty, what upstream's ADD made", func() {
		// Upstream's ADD, its exact rules (no owner comment).
		for _, args := range [][]string{
			{"-N", "CNI-FORWARD"}, {"-N", "CNI-ADMIN"},
			{"-I", "FORWARD", "1", "-m", "comment", "--comment", "CNI firewall plugin rules", "-j", "CNI-FORWARD"},
			{"-I", "CNI-FORWARD", "1", "-m", "comment", "--comment", "CNI firewall plugin admin overrides", "-j", "CNI-ADMIN"},
			{"-A", "CNI-FORWARD", "-d", "10.77.0.2/32", "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT"},
			{"-A", "CNI-FORWARD", "-s", "10.77.0.2/32", "-j", "ACCEPT"},
		} {
			Expect(iptablesIn(e.hostNS, args...)).To(Succeed())
		}
		Expect(testutil.Ping(e.contNS, "10.78.0.2")).To(Succeed())
		stdin := conf("1.1.0", "", prevResult("1.1.0", "vc", "10.77.0.2/24"))
		Expect(e.run(e.call("CHECK", stdin)).Err).To(BeNil())
		gc := testutil.Call{Command: "GC", Stdin: conf("1.1.0", `, "cni.dev/valid-attachments": []`, "")}
		Expect(e.run(gc).Err).To(BeNil())
		Expect(filterRules(e.hostNS)).To(ContainSubstring("-A CNI-FORWARD -s 10.77.0.2/32 -j ACCEPT"), "GC cannot attribute upstream's rules")
		del := e.call("DEL", stdin)
		del.Netns = ""
		Expect(e.run(del).Err).To(BeNil())
		Expect(filterRules(e.hostNS)).NotTo(ContainSubstring("10.77.0.2"))
		Expect(testutil.Ping(e.contNS, "10.78.0.2")).NotTo(Succeed())
	})
}

func iptablesOwn(e *fwEnv) {
	It("refuses bad input with its code and creates nothing", func() {
		prev := prevResult("1.1.0", "br0", "10.77.0.2/24")
		for _, tc := range []struct {
			stdin []byte
			code  uint
		}{
			{[]byte(`{"cniVersion": "1.1.0", "name": `), types.ErrDecodingFailure},
			{conf("1.1.0", `, "ingressPolicy": "closed"`, prev), types.ErrInvalidNetworkConfig},
			{conf("1.1.0", "", ""), types.ErrInvalidNetworkConfig}, // ADD needs prevResult
			{conf("1.1.0", `, "ingressPolicy": "same-bridge"`, `{"cniVersion": "1.1.0", "ips": [{"address": "10.77.0.2/24"}]}`), types.ErrInvalidNetworkConfig},
			{conf("1.1.0", "", `{"cniVersion": "1.1.0", "ips": "x"}`), types.ErrDecodingFailure},
			{conf("9.9.9", "", prev), types.ErrIncompatibleCNIVersion},
		} {
			out := e.run(e.call("ADD", tc.stdin))
			Expect(out.Err).NotTo(BeNil(), string(tc.stdin))
			Expect(out.Err.Code).To(BeEquivalentTo(tc.code), string(tc.stdin)+": "+out.Err.Msg)
		}
		c := e.call("ADD", conf("1.1.0", "", prev))
		c.ContainerID = ""
		out := e.run(c)
		testutil.ExpectCode(out, types.ErrInvalidEnvironmentVariables)
		Expect(filterRules(e.hostNS)).NotTo(ContainSubstring("CNI-"))
	})
}

func defaultRoute(n *ns.NetNS, gw string) error {
	h, err := n.Handle()
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName("eth0")
	if err != nil {
		return err
	}
	return h.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: netIP(gw)})
}

func netIP(s string) net.IP { return net.ParseIP(s) }

func attachHooksFailingAt(step string) attach.Hooks {
	return attach.Hooks{AfterStep: func(s string) error {
		if s == step {
			return fmt.Errorf("injected after %s", s)
		}
		return nil
	}}
}
