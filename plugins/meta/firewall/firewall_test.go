package firewall_test

import (
	"fmt"
	"net"
	"os/exec"
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

func filterRules(n *ns.NetNS) string {
	return testutil.NetfilterOutput(n, "iptables-save", "-t", "filter")
}

var _ = Describe("firewall", func() {
	var hostNS, contNS, outNS *ns.NetNS
	call := func(cmd string, stdin []byte) testutil.Call {
		return testutil.Call{Command: cmd, ContainerID: "c1", Netns: contNS.Path(), IfName: "eth0", Stdin: stdin}
	}
	run := func(c testutil.Call) testutil.Output { return testutil.RunIn(hostNS, firewall.Plugin, c) }

	BeforeEach(func() {
		hostNS, contNS, outNS = testutil.NewNS(), testutil.NewNS(), testutil.NewNS()
	})

	Context("with real traffic, FORWARD policy DROP in the stand-in host", func() {
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
			Expect(iptablesIn(hostNS, "-P", "FORWARD", "DROP")).To(Succeed())
			Expect(testutil.Ping(contNS, "10.78.0.2")).NotTo(Succeed(), "blocked without the plugin")
		})

		It("lets the container out after ADD, and not after DEL", func() {
			stdin := conf("1.1.0", "", prevResult("1.1.0", "vc", "10.77.0.2/24"))
			Expect(run(call("ADD", stdin)).Err).To(BeNil())
			Expect(testutil.Ping(contNS, "10.78.0.2")).To(Succeed())
			Expect(run(call("CHECK", stdin)).Err).To(BeNil())
			Expect(run(call("DEL", stdin)).Err).To(BeNil())
			Expect(testutil.Ping(contNS, "10.78.0.2")).NotTo(Succeed())
		})

		It("lets the admin chain's verdict win", func() {
			stdin := conf("1.1.0", `, "iptablesAdminChainName": "MY-ADMIN"`, prevResult("1.1.0", "vc", "10.77.0.2/24"))
			Expect(run(call("ADD", stdin)).Err).To(BeNil())
			Expect(testutil.Ping(contNS, "10.78.0.2")).To(Succeed())
			Expect(iptablesIn(hostNS, "-A", "MY-ADMIN", "-s", "10.77.0.2/32", "-j", "DROP")).To(Succeed())
			Expect(testutil.Ping(contNS, "10.78.0.2")).NotTo(Succeed())
			Expect(run(call("DEL", stdin)).Err).To(BeNil())
			Expect(filterRules(hostNS)).To(ContainSubstring("-A MY-ADMIN -s 10.77.0.2/32 -j DROP"), "the admin's rules stay")
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
				Expect(iptablesIn(hostNS, args...)).To(Succeed())
			}
			Expect(testutil.Ping(contNS, "10.78.0.2")).To(Succeed())
			stdin := conf("1.1.0", "", prevResult("1.1.0", "vc", "10.77.0.2/24"))
			Expect(run(call("CHECK", stdin)).Err).To(BeNil())
			gc := testutil.Call{Command: "GC", Stdin: conf("1.1.0", `, "cni.dev/valid-attachments": []`, "")}
			Expect(run(gc).Err).To(BeNil())
			Expect(filterRules(hostNS)).To(ContainSubstring("-A CNI-FORWARD -s 10.77.0.2/32 -j ACCEPT"), "GC cannot attribute upstream's rules")
			del := call("DEL", stdin)
			del.Netns = ""
			Expect(run(del).Err).To(BeNil())
			Expect(filterRules(hostNS)).NotTo(ContainSubstring("10.77.0.2"))
			Expect(testutil.Ping(contNS, "10.78.0.2")).NotTo(Succeed())
		})
	})

	DescribeTable("ADD, CHECK, DEL, DEL in every spec version", func(ver string) {
		stdin := conf(ver, "", prevResult(ver, "br0", "10.77.0.2/24"))
		out := run(call("ADD", stdin))
		Expect(out.Err).To(BeNil())
		res := testutil.ParseResult(ver, out.Stdout)
		Expect(res.IPs).To(HaveLen(1))
		Expect(res.IPs[0].Address.String()).To(Equal("10.77.0.2/24"))
		Expect(filterRules(hostNS)).To(ContainSubstring(`-A CNI-FORWARD -s 10.77.0.2/32 -m comment --comment "name: \"fwnet\" id: \"c1\" if: 65746830" -j ACCEPT`))
		if testutil.AtLeast(ver, "0.4.0") {
			Expect(run(call("CHECK", stdin)).Err).To(BeNil())
		}
		del := call("DEL", stdin)
		Expect(run(del).Err).To(BeNil())
		Expect(filterRules(hostNS)).NotTo(ContainSubstring("10.77.0.2"))
		del.Netns = ""
		Expect(run(del).Err).To(BeNil())
		if testutil.AtLeast(ver, "0.4.0") {
			out := run(call("CHECK", stdin))
			Expect(out.Err).NotTo(BeNil())
			Expect(out.Err.Msg).To(ContainSubstring("-s 10.77.0.2/32"))
		}
	}, testutil.VersionEntries())

	It("collects the rules of attachments GC does not list, and keeps the listed ones", func() {
		Expect(run(call("ADD", conf("1.1.0", "", prevResult("1.1.0", "br0", "10.77.0.2/24")))).Err).To(BeNil())
		c2 := call("ADD", conf("1.1.0", "", prevResult("1.1.0", "br0", "10.77.0.3/24")))
		c2.ContainerID = "c2"
		Expect(run(c2).Err).To(BeNil())
		gc := testutil.Call{Command: "GC", Stdin: conf("1.1.0", `, "cni.dev/valid-attachments": [{"containerID": "c2", "ifname": "eth0"}]`, "")}
		Expect(run(gc).Err).To(BeNil())
		rules := filterRules(hostNS)
		Expect(rules).NotTo(ContainSubstring("10.77.0.2/32"))
		Expect(rules).To(ContainSubstring("10.77.0.3/32"))
	})

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
			out := run(call("ADD", tc.stdin))
			Expect(out.Err).NotTo(BeNil(), string(tc.stdin))
			Expect(out.Err.Code).To(BeEquivalentTo(tc.code), string(tc.stdin)+": "+out.Err.Msg)
		}
		c := call("ADD", conf("1.1.0", "", prev))
		c.ContainerID = ""
		out := run(c)
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Code).To(BeEquivalentTo(types.ErrInvalidEnvironmentVariables))
		Expect(filterRules(hostNS)).NotTo(ContainSubstring("CNI-"))
	})

	DescribeTable("leaves no rule behind when ADD fails after a step", func(step string) {
		p := firewall.New(attach.Hooks{AfterStep: func(s string) error {
			if s == step {
				return fmt.Errorf("injected after %s", s)
			}
			return nil
		}})
		out := testutil.RunIn(hostNS, p, call("ADD", conf("1.1.0", `, "ingressPolicy": "isolated"`, prevResult("1.1.0", "br0", "10.77.0.2/24"))))
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Msg).To(ContainSubstring("injected after " + step))
		Expect(filterRules(hostNS)).NotTo(ContainSubstring("10.77.0.2"))
	}, Entry("resolve", firewall.StepResolve), Entry("rules", firewall.StepRules))

	It("answers STATUS", func() {
		Expect(run(testutil.Call{Command: "STATUS", Stdin: conf("1.1.0", "", "")}).Err).To(BeNil())
		out := run(testutil.Call{Command: "STATUS", Stdin: conf("1.1.0", "", ""), Env: map[string]string{"PATH": GinkgoT().TempDir()}})
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Code).To(BeEquivalentTo(50))
	})
})

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
