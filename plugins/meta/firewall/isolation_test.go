package firewall_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/meta/firewall"
)

// Two bridges in the stand-in host: br1 (10.81.0.0/24) with containers a
// (.2) and b (.3), br2 (10.82.0.0/24) with container c (.2). The host
// routes between them; FORWARD accepts everything. On each backend: ""
// (iptables here, where firewalld does not answer) and nftables.
var _ = DescribeTableSubtree("firewall ingress policies with two bridges", func(backend string) {
	var hostNS *ns.NetNS
	conts := map[string]*ns.NetNS{}
	addrs := map[string]string{"a": "10.81.0.2", "b": "10.81.0.3", "c": "10.82.0.2"}
	brOf := map[string]string{"a": "br1", "b": "br1", "c": "br2"}

	BeforeEach(func() {
		hostNS = testutil.NewNS()
		Expect(hostNS.Do(func() error {
			for br, gw := range map[string]string{"br1": "10.81.0.1/24", "br2": "10.82.0.1/24"} {
				l := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: br}}
				if err := netlink.LinkAdd(l); err != nil {
					return err
				}
				a, _ := netlink.ParseAddr(gw)
				if err := netlink.AddrAdd(l, a); err != nil {
					return err
				}
				if err := netlink.LinkSetUp(l); err != nil {
					return err
				}
			}
			if err := ip.SetSysctl("net/ipv4/ip_forward", "1"); err != nil {
				return err
			}
			// Frames bridged between two ports of one bridge reach the
			// iptables FORWARD chain only with this (isolated needs it).
			return ip.SetSysctl("net/bridge/bridge-nf-call-iptables", "1")
		})).To(Succeed())
		for name, addr := range addrs {
			conts[name] = testutil.NewNS()
			host := "v" + name
			Expect(testutil.ConnectNS(
				testutil.VethEnd{NS: hostNS, Name: host},
				testutil.VethEnd{NS: conts[name], Name: "eth0", Addrs: []string{addr + "/24"}},
			)).To(Succeed())
			Expect(hostNS.Do(func() error {
				l, err := netlink.LinkByName(host)
				if err != nil {
					return err
				}
				br, err := netlink.LinkByName(brOf[name])
				if err != nil {
					return err
				}
				return netlink.LinkSetMaster(l, br)
			})).To(Succeed())
			gw := "10.81.0.1"
			if brOf[name] == "br2" {
				gw = "10.82.0.1"
			}
			Expect(defaultRoute(conts[name], gw)).To(Succeed())
		}
		for _, pair := range [][2]string{{"a", "b"}, {"a", "c"}} {
			Expect(testutil.Ping(conts[pair[0]], addrs[pair[1]])).To(Succeed(), "%s -> %s without the plugin", pair[0], pair[1])
		}
	})

	add := func(policy string) {
		GinkgoHelper()
		for name, addr := range addrs {
			prev := prevResult("1.1.0", brOf[name], addr+"/24")
			stdin := conf("1.1.0", fmt.Sprintf(`, "ingressPolicy": %q, "backend": %q`, policy, backend), prev)
			c := testutil.Call{Command: "ADD", ContainerID: name, Netns: conts[name].Path(), IfName: "eth0", Stdin: stdin}
			Expect(testutil.RunIn(hostNS, firewall.Plugin, c).Err).To(BeNil())
			c.Command = "CHECK"
			Expect(testutil.RunIn(hostNS, firewall.Plugin, c).Err).To(BeNil())
		}
	}

	It("same-bridge drops traffic from another bridge and keeps the bridge's own", func() {
		add("same-bridge")
		Expect(testutil.Ping(conts["a"], addrs["c"])).NotTo(Succeed())
		Expect(testutil.Ping(conts["c"], addrs["a"])).NotTo(Succeed())
		Expect(testutil.Ping(conts["a"], addrs["b"])).To(Succeed())
	})

	It("isolated drops traffic within the bridge too", func() {
		add("isolated")
		Expect(testutil.Ping(conts["a"], addrs["c"])).NotTo(Succeed())
		Expect(testutil.Ping(conts["a"], addrs["b"])).NotTo(Succeed())
	})

	It("open drops nothing", func() {
		add("open")
		Expect(testutil.Ping(conts["a"], addrs["c"])).To(Succeed())
		Expect(testutil.Ping(conts["a"], addrs["b"])).To(Succeed())
	})
}, Entry("iptables", ""), Entry("nftables", "nftables"))
