package bridge_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/macspoof"
	"github.com/cniforge/plugins/pkg/netfilter/masq"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/main/bridge"
)

var _ = Describe("bridge", func() {
	env := testutil.UseAttachEnv(bridge.Plugin, "eth0")

	call := func(cmd string, stdin []byte) testutil.Call {
		return env.Call(cmd, "c1", env.ContNS, stdin)
	}
	// snapshot is what c1 could leave behind, its netfilter rules included.
	snapshot := func() testutil.Snapshot {
		GinkgoHelper()
		return env.Snapshot(func() []string { return ownedRules(env.HostNS, "c1") })
	}
	// delTwice runs DEL with stdin twice; the first must leave nothing of c1
	// but the bridge, the second must succeed too.
	delTwice := func(stdin []byte) {
		GinkgoHelper()
		Expect(run(env.HostNS, call("DEL", stdin)).Err).To(BeNil())
		Expect(testutil.LinkNames(env.ContNS)).To(ConsistOf("lo"))
		Expect(testutil.LinkNames(env.HostNS)).To(ConsistOf("lo", "cnibr0"))
		Expect(testutil.Reservations(env.DataDir)).To(BeEmpty())
		Expect(rulesText(env.HostNS)).NotTo(MatchRegexp(ownerRE("c1")))
		Expect(run(env.HostNS, call("DEL", stdin)).Err).To(BeNil())
	}

	DescribeTableSubtree("every spec version", func(ver string) {
		var stdin []byte
		BeforeEach(func() {
			stdin = netConf(ver, `"isGateway": true, "ipMasq": true`, hostLocal(env.DataDir, "10.11.0.0/24"))
		})

		It("wires the container to the bridge and reports it in the requested version", func() {
			out := run(env.HostNS, call("ADD", stdin))
			Expect(out.Err).To(BeNil())
			cur := testutil.ParseResult(ver, out.Stdout)
			Expect(cur.IPs).To(HaveLen(1))
			Expect(cur.IPs[0].Address.String()).To(Equal("10.11.0.2/24"))
			Expect(testutil.Addrs(env.ContNS, "eth0")).To(ConsistOf("10.11.0.2/24"))
			Expect(testutil.Addrs(env.HostNS, "cnibr0")).To(ConsistOf("10.11.0.1/24"))
			if testutil.AtLeast(ver, "0.3.0") {
				Expect(cur.Interfaces).To(HaveLen(3))
				Expect(cur.Interfaces[0].Name).To(Equal("cnibr0"))
				Expect(cur.Interfaces[0].Mac).NotTo(BeEmpty())
				Expect(cur.Interfaces[1].Sandbox).To(BeEmpty())
				Expect(cur.Interfaces[2].Name).To(Equal("eth0"))
				Expect(cur.Interfaces[2].Sandbox).To(Equal(env.ContNS.Path()))
				Expect(*cur.IPs[0].Interface).To(Equal(2))
				hostVeth, err := testutil.Handle(env.HostNS).LinkByName(cur.Interfaces[1].Name)
				Expect(err).NotTo(HaveOccurred())
				Expect(hostVeth.Attrs().HardwareAddr.String()).To(Equal(cur.Interfaces[1].Mac))
			}
			Expect(testutil.Ping(env.ContNS, "10.11.0.1")).To(Succeed())
		})

		It("survives ADD, CHECK, DEL, DEL", func() {
			out := run(env.HostNS, call("ADD", stdin))
			Expect(out.Err).To(BeNil())
			if testutil.AtLeast(ver, "0.4.0") {
				Expect(run(env.HostNS, call("CHECK", testutil.WithPrev(stdin, out.Stdout))).Err).To(BeNil())
			}
			Expect(rulesText(env.HostNS)).To(MatchRegexp(ownerRE("c1")))
			delTwice(stdin)
		})

		It("succeeds on DEL without a netns and releases the address", func() {
			Expect(run(env.HostNS, call("ADD", stdin)).Err).To(BeNil())
			c := call("DEL", stdin)
			c.Netns = ""
			Expect(run(env.HostNS, c).Err).To(BeNil())
			Expect(testutil.Reservations(env.DataDir)).To(BeEmpty())
			Expect(rulesText(env.HostNS)).NotTo(MatchRegexp(ownerRE("c1")))
		})
	}, testutil.VersionEntries())

	It("lets two containers on one bridge reach each other", func() {
		stdin := netConf("1.1.0", "", hostLocal(env.DataDir, "10.12.0.0/24"))
		cont2 := testutil.NewNS()
		r1 := mustAdd(env.HostNS, call("ADD", stdin))
		c2 := call("ADD", stdin)
		c2.ContainerID, c2.Netns = "c2", cont2.Path()
		r2 := mustAdd(env.HostNS, c2)
		Expect(testutil.Ping(env.ContNS, r2.IPs[0].Address.IP.String())).To(Succeed())
		Expect(testutil.Ping(cont2, r1.IPs[0].Address.IP.String())).To(Succeed())
	})

	It("announces the container's address with a gratuitous ARP that reaches the bridge", func() {
		// The bridge exists before, so that the listener can watch it.
		h := testutil.Handle(env.HostNS)
		Expect(h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "cnibr0"}})).To(Succeed())
		Expect(h.LinkSetUp(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "cnibr0"}})).To(Succeed())
		l, err := testutil.ListenARP(env.HostNS, "cnibr0")
		Expect(err).NotTo(HaveOccurred())
		defer l.Close()
		res := mustAdd(env.HostNS, call("ADD", netConf("1.1.0", `"isGateway": true`, hostLocal(env.DataDir, "10.12.0.0/24"))))
		mac, err := net.ParseMAC(res.Interfaces[2].Mac)
		Expect(err).NotTo(HaveOccurred())
		Expect(l.Announced(res.IPs[0].Address.IP.String(), 5*time.Second)).To(Equal(mac))
	})

	It("DEL removes the veth, the rules and the reservation with a config that no longer validates", func() {
		// A config edited between ADD and DEL must not keep the attachment
		// from being removed; upstream's DEL succeeds too (issue 22).
		ipam := hostLocal(env.DataDir, "10.11.0.0/24")
		Expect(run(env.HostNS, call("ADD", netConf("1.1.0", `"isGateway": true, "ipMasq": true`, ipam))).Err).To(BeNil())
		Expect(rulesText(env.HostNS)).To(MatchRegexp(ownerRE("c1")))
		edited := netConf("1.1.0", `"isGateway": true, "ipMasq": true, "ipMasqBackend": "pf", "vlan": 5000, "mtu": 5, "hairpinMode": true, "promiscMode": true`, ipam)
		out := run(env.HostNS, call("ADD", edited))
		testutil.ExpectCode(out, types.ErrInvalidNetworkConfig, "ADD still refuses it")
		delTwice(edited)
	})

	It("ends in the same state after ADD, DEL, ADD", func() {
		stdin := netConf("1.1.0", `"isDefaultGateway": true`, hostLocal(env.DataDir, "10.13.0.0/24"))
		r1 := mustAdd(env.HostNS, call("ADD", stdin))
		routes1, bridgeAddrs1 := testutil.Routes(env.ContNS), testutil.Addrs(env.HostNS, "cnibr0")
		Expect(run(env.HostNS, call("DEL", stdin)).Err).To(BeNil())
		r2 := mustAdd(env.HostNS, call("ADD", stdin))
		// host-local hands out addresses round-robin: the second ADD gets
		// the next one; everything else is as before.
		Expect(testutil.Addrs(env.ContNS, "eth0")).To(ConsistOf(r2.IPs[0].Address.String()))
		Expect(r2.IPs[0].Address.Mask).To(Equal(r1.IPs[0].Address.Mask))
		// The subnet route the kernel adds names the address as its source.
		ip1, ip2 := r1.IPs[0].Address.IP.String(), r2.IPs[0].Address.IP.String()
		var wantRoutes []string
		for _, r := range routes1 {
			wantRoutes = append(wantRoutes, strings.ReplaceAll(r, " src "+ip1, " src "+ip2))
		}
		Expect(testutil.Routes(env.ContNS)).To(ConsistOf(wantRoutes))
		Expect(testutil.Addrs(env.HostNS, "cnibr0")).To(ConsistOf(bridgeAddrs1))
		Expect(r2.Routes).To(Equal(r1.Routes))
		Expect(testutil.Reservations(env.DataDir)).To(ConsistOf(netName + "/" + r2.IPs[0].Address.IP.String()))
		Expect(testutil.LinkNames(env.HostNS)).To(ConsistOf("lo", "cnibr0", r2.Interfaces[1].Name))
		Expect(run(env.HostNS, call("CHECK", testutil.WithPrev(stdin, resultJSON(r2)))).Err).To(BeNil())
	})

	It("sets the gateway and default routes for isDefaultGateway", func() {
		stdin := netConf("1.1.0", `"isDefaultGateway": true`, hostLocal(env.DataDir, "10.14.0.0/24"))
		res := mustAdd(env.HostNS, call("ADD", stdin))
		Expect(res.IPs[0].Gateway.String()).To(Equal("10.14.0.1"))
		Expect(testutil.Routes(env.ContNS)).To(ContainElement("default via 10.14.0.1 dev eth0"))
		Expect(testutil.Addrs(env.HostNS, "cnibr0")).To(ContainElement("10.14.0.1/24"))
		var sawDefault bool
		for _, r := range res.Routes {
			if r.Dst.String() == "0.0.0.0/0" && r.GW.Equal(net.ParseIP("10.14.0.1")) {
				sawDefault = true
			}
		}
		Expect(sawDefault).To(BeTrue())
		var forward []byte
		Expect(env.HostNS.Do(func() (err error) {
			forward, err = os.ReadFile("/proc/sys/net/ipv4/ip_forward")
			return err
		})).To(Succeed())
		Expect(string(forward)).To(Equal("1\n"))
	})

	It("adds no default route with isGateway alone", func() {
		stdin := netConf("1.1.0", `"isGateway": true`, hostLocal(env.DataDir, "10.15.0.0/24"))
		mustAdd(env.HostNS, call("ADD", stdin))
		Expect(testutil.Addrs(env.HostNS, "cnibr0")).To(ContainElement("10.15.0.1/24"))
		for _, r := range testutil.Routes(env.ContNS) {
			Expect(r).NotTo(HavePrefix("default"))
		}
	})

	It("refuses a bridge address of another subnet unless forceAddress", func() {
		h := testutil.Handle(env.HostNS)
		br := addBridge(h, "cnibr0")
		Expect(h.AddrAdd(br, mustAddr("10.16.0.1/24"))).To(Succeed())
		stdin := netConf("1.1.0", `"isGateway": true`, hostLocal(env.DataDir, "10.17.0.0/24"))
		out := run(env.HostNS, call("ADD", stdin))
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Msg).To(ContainSubstring("forceAddress"))
		Expect(testutil.Reservations(env.DataDir)).To(BeEmpty())
		Expect(testutil.LinkNames(env.ContNS)).To(ConsistOf("lo"))
		Expect(testutil.LinkNames(env.HostNS)).To(ConsistOf("lo", "cnibr0"), "a bridge the ADD did not create stays")

		stdin = netConf("1.1.0", `"isGateway": true, "forceAddress": true`, hostLocal(env.DataDir, "10.17.0.0/24"))
		mustAdd(env.HostNS, call("ADD", stdin))
		Expect(testutil.Addrs(env.HostNS, "cnibr0")).To(ConsistOf("10.17.0.1/24"))
	})

	It("refuses a link of the bridge's name that is not a bridge", func() {
		h := testutil.Handle(env.HostNS)
		la := netlink.NewLinkAttrs()
		la.Name = "cnibr0"
		Expect(h.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "peer0"})).To(Succeed())
		out := run(env.HostNS, call("ADD", netConf("1.1.0", "", hostLocal(env.DataDir, "10.18.0.0/24"))))
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Msg).To(ContainSubstring(`"cnibr0" is a veth`))
		Expect(out.Err.Code).To(BeEquivalentTo(types.ErrInvalidNetworkConfig))
		Expect(out.Err.Msg).To(ContainSubstring(`bridge: "cnibr0"`))
		Expect(testutil.LinkNames(env.HostNS)).To(ConsistOf("lo", "cnibr0", "peer0"))
		Expect(testutil.LinkNames(env.ContNS)).To(ConsistOf("lo"))
		Expect(testutil.Reservations(env.DataDir)).To(BeEmpty())
	})

	It("works dual-stack", func() {
		stdin := netConf("1.1.0", `"isDefaultGateway": true`, hostLocal(env.DataDir, "10.19.0.0/24", "fd00:19::/64"))
		cont2 := testutil.NewNS()
		res := mustAdd(env.HostNS, call("ADD", stdin))
		Expect(res.IPs).To(HaveLen(2))
		c2 := call("ADD", stdin)
		c2.ContainerID, c2.Netns = "c2", cont2.Path()
		r2 := mustAdd(env.HostNS, c2)
		Expect(testutil.Addrs(env.ContNS, "eth0")).To(ConsistOf("10.19.0.2/24", "fd00:19::2/64"))
		Expect(testutil.Addrs(env.HostNS, "cnibr0")).To(ConsistOf("10.19.0.1/24", "fd00:19::1/64"))
		Expect(testutil.Routes(env.ContNS)).To(ContainElements("default via 10.19.0.1 dev eth0", "default via fd00:19::1 dev eth0"))
		// No DAD: the addresses are usable as soon as ADD returns.
		Expect(testutil.Ping(env.ContNS, "fd00:19::1")).To(Succeed())
		Expect(testutil.Ping(env.ContNS, r2.IPs[1].Address.IP.String())).To(Succeed())
		Expect(run(env.HostNS, call("CHECK", testutil.WithPrev(stdin, resultJSON(res)))).Err).To(BeNil())
	})

	It("connects at layer 2 only with ipam {}", func() {
		stdin := netConf("1.1.0", "", "{}")
		cont2 := testutil.NewNS()
		res := mustAdd(env.HostNS, call("ADD", stdin))
		Expect(res.IPs).To(BeEmpty())
		Expect(res.Interfaces).To(HaveLen(3))
		c2 := call("ADD", stdin)
		c2.ContainerID, c2.Netns = "c2", cont2.Path()
		mustAdd(env.HostNS, c2)
		// The runtime (here: the test) addresses the interfaces itself.
		for i, n := range []*ns.NetNS{env.ContNS, cont2} {
			h := testutil.Handle(n)
			l, err := h.LinkByName("eth0")
			Expect(err).NotTo(HaveOccurred())
			Expect(l.Attrs().Flags & net.FlagUp).NotTo(BeZero())
			Expect(h.AddrAdd(l, mustAddr(fmt.Sprintf("10.20.0.%d/24", i+2)))).To(Succeed())
		}
		Expect(testutil.Ping(env.ContNS, "10.20.0.3")).To(Succeed())
		Expect(run(env.HostNS, call("CHECK", testutil.WithPrev(stdin, resultJSON(res)))).Err).To(BeNil())
		Expect(run(env.HostNS, call("DEL", stdin)).Err).To(BeNil())
		Expect(testutil.LinkNames(env.ContNS)).To(ConsistOf("lo"))
	})

	It("uses the MAC from runtimeConfig and leaves the interface down with disableContainerInterface", func() {
		stdin := netConf("1.1.0", `"runtimeConfig": {"mac": "02:11:22:33:44:55"}, "disableContainerInterface": true`, "")
		res := mustAdd(env.HostNS, call("ADD", stdin))
		Expect(res.Interfaces[2].Mac).To(Equal("02:11:22:33:44:55"))
		l, err := testutil.Handle(env.ContNS).LinkByName("eth0")
		Expect(err).NotTo(HaveOccurred())
		Expect(l.Attrs().HardwareAddr.String()).To(Equal("02:11:22:33:44:55"))
		Expect(l.Attrs().Flags & net.FlagUp).To(BeZero())
	})

	// portInfo is the bridge port settings of the host end res reports.
	portInfo := func(res *current.Result) netlink.Protinfo {
		GinkgoHelper()
		h := testutil.Handle(env.HostNS)
		port, err := h.LinkByName(res.Interfaces[1].Name)
		Expect(err).NotTo(HaveOccurred())
		pi, err := h.LinkGetProtinfo(port)
		Expect(err).NotTo(HaveOccurred())
		return pi
	}

	It("sets hairpin mode and port isolation on the port", func() {
		stdin := netConf("1.1.0", `"hairpinMode": true, "portIsolation": true`, hostLocal(env.DataDir, "10.21.0.0/24"))
		res := mustAdd(env.HostNS, call("ADD", stdin))
		pi := portInfo(res)
		Expect(pi.Hairpin).To(BeTrue())
		Expect(pi.Isolated).To(BeTrue())
	})

	It("leaves hairpin off by default", func() {
		res := mustAdd(env.HostNS, call("ADD", netConf("1.1.0", "", hostLocal(env.DataDir, "10.22.0.0/24"))))
		pi := portInfo(res)
		Expect(pi.Hairpin).To(BeFalse())
	})

	for _, backend := range []string{"iptables", "nftables"} {
		It("masquerades traffic to the outside with "+backend, func() {
			outside := testutil.NewOutside(env.HostNS)
			stdin := netConf("1.1.0", fmt.Sprintf(`"isDefaultGateway": true, "ipMasq": true, "ipMasqBackend": %q`, backend),
				hostLocal(env.DataDir, "10.23.0.0/24"))
			out := run(env.HostNS, call("ADD", stdin))
			Expect(out.Err).To(BeNil())
			// outside has no route to 10.23.0.0/24: only a masqueraded
			// ping is answered.
			Expect(testutil.Ping(env.ContNS, "10.99.0.2")).To(Succeed())
			Expect(testutil.UDPSource(env.ContNS, outside, testutil.OutsideAddr)).To(Equal(testutil.OutsideHostAddr), "the outside sees the host's address")
			Expect(run(env.HostNS, call("CHECK", testutil.WithPrev(stdin, out.Stdout))).Err).To(BeNil())

			Expect(run(env.HostNS, call("DEL", stdin)).Err).To(BeNil())
			Expect(rulesText(env.HostNS)).NotTo(MatchRegexp(ownerRE("c1")))
		})
	}

	for _, backend := range []string{"iptables", "nftables"} {
		It("keeps the source address towards ipMasqExcludeCIDRs with "+backend+", and CHECK asks for it", func() {
			outside := testutil.NewOutside(env.HostNS)
			keys := func(cidr string) string {
				return fmt.Sprintf(`"isDefaultGateway": true, "ipMasq": true, "ipMasqBackend": %q, "ipMasqExcludeCIDRs": [%q]`, backend, cidr)
			}
			stdin := netConf("1.1.0", keys("10.99.0.0/16"), hostLocal(env.DataDir, "10.25.0.0/24"))
			out := run(env.HostNS, call("ADD", stdin))
			Expect(out.Err).To(BeNil())
			res := testutil.ParseResult("1.1.0", out.Stdout)
			Expect(testutil.UDPSource(env.ContNS, outside, testutil.OutsideAddr)).To(Equal(res.IPs[0].Address.IP.String()),
				"the outside is excluded: it sees the container's own address")
			Expect(run(env.HostNS, call("CHECK", testutil.WithPrev(stdin, out.Stdout))).Err).To(BeNil())
			other := netConf("1.1.0", keys("10.98.0.0/16"), hostLocal(env.DataDir, "10.25.0.0/24"))
			chk := run(env.HostNS, call("CHECK", testutil.WithPrev(other, out.Stdout)))
			Expect(chk.Err).NotTo(BeNil(), "CHECK of another exclusion finds it missing")
			Expect(chk.Err.Error()).To(ContainSubstring("10.98.0.0/16"))

			Expect(run(env.HostNS, call("DEL", stdin)).Err).To(BeNil())
			Expect(rulesText(env.HostNS)).NotTo(MatchRegexp(ownerRE("c1")))
		})
	}

	It("drops frames with a spoofed source MAC with macspoofchk", func() {
		stdin := netConf("1.1.0", `"macspoofchk": true`, hostLocal(env.DataDir, "10.24.0.0/24"))
		cont2 := testutil.NewNS()
		out := run(env.HostNS, call("ADD", stdin))
		Expect(out.Err).To(BeNil())
		c2 := call("ADD", stdin)
		c2.ContainerID, c2.Netns = "c2", cont2.Path()
		r2 := mustAdd(env.HostNS, c2)
		peer := r2.IPs[0].Address.IP.String()
		Expect(testutil.Ping(env.ContNS, peer)).To(Succeed())
		Expect(run(env.HostNS, call("CHECK", testutil.WithPrev(stdin, out.Stdout))).Err).To(BeNil())

		h := testutil.Handle(env.ContNS)
		l, err := h.LinkByName("eth0")
		Expect(err).NotTo(HaveOccurred())
		Expect(h.LinkSetHardwareAddr(l, net.HardwareAddr{0x02, 0xde, 0xad, 0, 0, 1})).To(Succeed())
		Expect(testutil.Ping(env.ContNS, peer)).NotTo(Succeed())

		chains := strings.Count(rulesText(env.HostNS), "cni-br-iface-")
		Expect(run(env.HostNS, call("DEL", stdin)).Err).To(BeNil())
		Expect(strings.Count(rulesText(env.HostNS), "cni-br-iface-")).To(And(BeNumerically("<", chains), BeNumerically(">", 0)),
			"c1's check is gone, c2's stays")
		Expect(run(env.HostNS, call("DEL", stdin)).Err).To(BeNil())
	})

	DescribeTable("leaves nothing behind when ADD fails after a step",
		func(step string) {
			stdin := netConf("1.1.0", `"isDefaultGateway": true, "ipMasq": true, "macspoofchk": true`,
				hostLocal(env.DataDir, "10.25.0.0/24", "fd00:25::/64"))
			before := snapshot()
			out := testutil.RunIn(env.HostNS, bridge.FailingAfter(step), call("ADD", stdin))
			Expect(out.Err).NotTo(BeNil())
			Expect(out.Err.Msg).To(ContainSubstring("injected failure after step %q", step))
			Expect(snapshot()).To(Equal(before))
			Expect(before.HostLinks).To(ConsistOf("lo"))
			Expect(before.Extra[0]).To(BeEmpty())
		},
		testutil.StepEntries(bridge.AddSteps),
	)

	DescribeTable("leaves a bridge with another attachment as it was when ADD fails after a step",
		func(step string) {
			stdin := netConf("1.1.0", `"isDefaultGateway": true, "ipMasq": true, "macspoofchk": true`,
				hostLocal(env.DataDir, "10.39.0.0/24", "fd00:39::/64"))
			other := testutil.NewNS()
			c0 := call("ADD", stdin)
			c0.ContainerID, c0.Netns = "c0", other.Path()
			r0 := mustAdd(env.HostNS, c0)
			hostLinks, bridgeAddrs := testutil.LinkNames(env.HostNS), testutil.Addrs(env.HostNS, "cnibr0")
			reservations := testutil.Reservations(env.DataDir)

			out := testutil.RunIn(env.HostNS, bridge.FailingAfter(step), call("ADD", stdin))
			Expect(out.Err).NotTo(BeNil())
			Expect(out.Err.Msg).To(ContainSubstring("injected failure after step %q", step))
			Expect(testutil.LinkNames(env.HostNS)).To(Equal(hostLinks))
			Expect(testutil.Addrs(env.HostNS, "cnibr0")).To(Equal(bridgeAddrs))
			Expect(testutil.Reservations(env.DataDir)).To(Equal(reservations))
			Expect(testutil.LinkNames(env.ContNS)).To(ConsistOf("lo"))
			rules := rulesText(env.HostNS)
			Expect(rules).NotTo(MatchRegexp(ownerRE("c1")))
			Expect(rules).To(MatchRegexp(ownerRE("c0")))
			chk := c0
			chk.Command, chk.Stdin = "CHECK", testutil.WithPrev(stdin, resultJSON(r0))
			Expect(run(env.HostNS, chk).Err).To(BeNil())
			Expect(testutil.Ping(other, "10.39.0.1")).To(Succeed())
		},
		testutil.StepEntries(bridge.AddSteps),
	)

	It("puts back the addresses forceAddress replaced when ADD fails", func() {
		h := testutil.Handle(env.HostNS)
		br := addBridge(h, "cnibr0")
		Expect(h.AddrAdd(br, mustAddr("10.40.0.1/24"))).To(Succeed())
		stdin := netConf("1.1.0", `"isGateway": true, "forceAddress": true`, hostLocal(env.DataDir, "10.41.0.0/24"))
		out := testutil.RunIn(env.HostNS, bridge.FailingAfter("gateway"), call("ADD", stdin))
		Expect(out.Err).NotTo(BeNil())
		Expect(testutil.Addrs(env.HostNS, "cnibr0")).To(ConsistOf("10.40.0.1/24"))
	})

	It("keeps the replaced addresses out when the rollback keeps the gateway for another port", func() {
		h := testutil.Handle(env.HostNS)
		br := addBridge(h, "cnibr0")
		Expect(h.AddrAdd(br, mustAddr("10.40.0.1/24"))).To(Succeed())
		joinBridge := func() {
			defer GinkgoRecover()
			// What a concurrent ADD would have done: the new gateway is now its gateway too.
			la := netlink.NewLinkAttrs()
			la.Name = "other0"
			Expect(h.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "otherpeer0"})).To(Succeed())
			l, err := h.LinkByName("other0")
			Expect(err).NotTo(HaveOccurred())
			Expect(h.LinkSetMaster(l, br)).To(Succeed())
		}
		stdin := netConf("1.1.0", `"isGateway": true, "forceAddress": true`, hostLocal(env.DataDir, "10.41.0.0/24"))
		out := testutil.RunIn(env.HostNS, bridge.FailingAfterWith("gateway", joinBridge), call("ADD", stdin))
		Expect(out.Err).NotTo(BeNil())
		Expect(testutil.Addrs(env.HostNS, "cnibr0")).To(ConsistOf("10.41.0.1/24"), "one IPv4 gateway, as forceAddress left it")
		Expect(testutil.LinkNames(env.ContNS)).To(ConsistOf("lo"))
	})

	It("keeps the bridge a failed ADD created when another attachment joined it meanwhile", func() {
		h := testutil.Handle(env.HostNS)
		joinBridge := func() {
			defer GinkgoRecover()
			addPort(h, "other0", "otherpeer0", "cnibr0") // what a concurrent ADD would have done
		}
		stdin := netConf("1.1.0", `"isGateway": true`, hostLocal(env.DataDir, "10.43.0.0/24"))
		out := testutil.RunIn(env.HostNS, bridge.FailingAfterWith("ipam", joinBridge), call("ADD", stdin))
		Expect(out.Err).NotTo(BeNil())
		Expect(testutil.LinkNames(env.HostNS)).To(ConsistOf("lo", "cnibr0", "other0", "otherpeer0"))
		Expect(testutil.LinkNames(env.ContNS)).To(ConsistOf("lo"))
		Expect(testutil.Reservations(env.DataDir)).To(BeEmpty())
	})

	It("pins a bridge it did not create to the MAC it had before the port joined", func() {
		h := testutil.Handle(env.HostNS)
		br := addBridge(h, "cnibr0")
		mac := br.Attrs().HardwareAddr.String()
		res := mustAdd(env.HostNS, call("ADD", netConf("1.1.0", `"isGateway": true`, hostLocal(env.DataDir, "10.42.0.0/24"))))
		Expect(res.Interfaces[0].Mac).To(Equal(mac))
		br, err := h.LinkByName("cnibr0")
		Expect(err).NotTo(HaveOccurred())
		Expect(br.Attrs().HardwareAddr.String()).To(Equal(mac), "not the port's %s", res.Interfaces[1].Mac)
	})

	It("catches removed MAC spoof rules on CHECK", func() {
		stdin := netConf("1.1.0", `"macspoofchk": true`, hostLocal(env.DataDir, "10.47.0.0/24"))
		out := run(env.HostNS, call("ADD", stdin))
		Expect(out.Err).To(BeNil())
		chk := call("CHECK", testutil.WithPrev(stdin, out.Stdout))
		Expect(run(env.HostNS, chk).Err).To(BeNil())
		Expect(env.HostNS.Do(func() error {
			return macspoof.TeardownMacSpoofCheck(netfilter.Owner{Network: netName, ContainerID: "c1", IfName: "eth0"})
		})).To(Succeed())
		out = run(env.HostNS, chk)
		Expect(out.Err).NotTo(BeNil())
	})

	It("fails ADD, leaving nothing, when the host's bridge nat PREROUTING is hooked on input", func() {
		// issue 22, defect 3: a jump from a chain on the wrong hook would
		// check no forwarded frame; the check must not be silently void.
		nft := exec.Command("nft", "-f", "-")
		nft.Stdin = strings.NewReader("table bridge nat {\n chain PREROUTING {\n type filter hook input priority -300; policy accept;\n }\n}\n")
		Expect(env.HostNS.Do(func() error {
			if out, err := nft.CombinedOutput(); err != nil {
				return fmt.Errorf("nft: %w: %s", err, out)
			}
			return nil
		})).To(Succeed())
		before := snapshot()
		stdin := netConf("1.1.0", `"macspoofchk": true`, hostLocal(env.DataDir, "10.46.0.0/24"))
		out := run(env.HostNS, call("ADD", stdin))
		testutil.ExpectCode(out, 999)
		Expect(out.Err.Msg).To(And(ContainSubstring("table bridge nat chain PREROUTING"),
			ContainSubstring(`"type filter hook input priority -300"`), ContainSubstring("hook prerouting priority -300")))
		Expect(snapshot()).To(Equal(before))
		Expect(rulesText(env.HostNS)).NotTo(ContainSubstring("cni-br-iface-"))
		Expect(run(env.HostNS, call("DEL", stdin)).Err).To(BeNil())
	})

	It("removes the MAC spoof-check on DEL even when macspoofchk was turned off since ADD", func() {
		mustAdd(env.HostNS, call("ADD", netConf("1.1.0", `"macspoofchk": true`, hostLocal(env.DataDir, "10.48.0.0/24"))))
		Expect(rulesText(env.HostNS)).To(ContainSubstring("cni-br-iface-"))
		Expect(run(env.HostNS, call("DEL", netConf("1.1.0", "", hostLocal(env.DataDir, "10.48.0.0/24")))).Err).To(BeNil())
		Expect(rulesText(env.HostNS)).NotTo(ContainSubstring("cni-br-iface-"))
	})

	It("cleans up on DEL whatever prevResult holds: it never parses it", func() {
		stdin := netConf("1.1.0", `"isGateway": true, "ipMasq": true, "macspoofchk": true`, hostLocal(env.DataDir, "10.49.0.0/24"))
		mustAdd(env.HostNS, call("ADD", stdin))
		bad := testutil.WithPrev(stdin, []byte(`{"cniVersion": "9.9.9"}`))
		Expect(run(env.HostNS, call("DEL", bad)).Err).To(BeNil())
		Expect(testutil.LinkNames(env.ContNS)).To(ConsistOf("lo"))
		Expect(testutil.LinkNames(env.HostNS)).To(ConsistOf("lo", "cnibr0"))
		Expect(testutil.Reservations(env.DataDir)).To(BeEmpty())
		Expect(rulesText(env.HostNS)).NotTo(MatchRegexp(ownerRE("c1")))
		Expect(rulesText(env.HostNS)).NotTo(ContainSubstring("cni-br-iface-"))
	})

	It("refuses its own namespace as CNI_NETNS with code 8 before any change", func() {
		c := call("ADD", netConf("1.1.0", `"isGateway": true`, hostLocal(env.DataDir, "10.50.0.0/24")))
		c.Netns = env.HostNS.Path()
		out := run(env.HostNS, c)
		testutil.ExpectCode(out, types.ErrInvalidNetNS)
		Expect(out.Err.Msg).To(ContainSubstring(env.HostNS.Path()))
		var e types.Error
		Expect(json.Unmarshal(out.Stdout, &e)).To(Succeed(), "one JSON document on stdout: %s", out.Stdout)
		Expect(testutil.LinkNames(env.HostNS)).To(ConsistOf("lo"))
		Expect(testutil.Reservations(env.DataDir)).To(BeEmpty())
	})

	It("refuses an ipam.type missing from CNI_PATH with code 7 before any change", func() {
		c := call("ADD", netConf("1.1.0", "", `{"type": "no-such-ipam"}`))
		c.Path = GinkgoT().TempDir()
		out := run(env.HostNS, c)
		testutil.ExpectCode(out, types.ErrInvalidNetworkConfig)
		Expect(out.Err.Msg).To(ContainSubstring(`ipam.type: "no-such-ipam" not found`))
		Expect(testutil.LinkNames(env.HostNS)).To(ConsistOf("lo"))
	})

	It("refuses an IPAM result with an incomplete entry, releases it and leaves nothing, with isGateway", func() {
		dir := GinkgoT().TempDir()
		released := filepath.Join(dir, "released")
		script := `#!/bin/sh
[ "$CNI_COMMAND" = DEL ] && touch ` + released + `
echo '{"cniVersion": "1.1.0", "ips": [{"address": "10.51.0.2/24"}, {}]}'
`
		Expect(os.WriteFile(filepath.Join(dir, "fake-ipam"), []byte(script), 0o755)).To(Succeed())
		c := call("ADD", netConf("1.1.0", `"isGateway": true`, `{"type": "fake-ipam"}`))
		c.Path = dir
		out := run(env.HostNS, c)
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Msg).To(ContainSubstring("ips[1].address: missing"))
		var e types.Error
		Expect(json.Unmarshal(out.Stdout, &e)).To(Succeed(), "one JSON document on stdout: %s", out.Stdout)
		Expect(released).To(BeAnExistingFile())
		Expect(testutil.LinkNames(env.HostNS)).To(ConsistOf("lo"))
		Expect(testutil.LinkNames(env.ContNS)).To(ConsistOf("lo"))
	})

	It("runs IPAM with the container interface up on the bridge, as the dhcp IPAM plugin needs", func() {
		// At IPAM ADD: the container end in CNI_NETNS up, and the host end
		// up on the bridge.
		dir := GinkgoT().TempDir()
		testutil.ProbeIPAM(dir, "10.54.0.2/24")
		c := call("ADD", netConf("1.1.0", "", `{"type": "probe-ipam"}`))
		c.Path = dir
		var ports []string
		out := testutil.AtIPAMAdd(dir, func() testutil.Output { return run(env.HostNS, c) }, func() {
			l, err := testutil.Handle(env.ContNS).LinkByName("eth0")
			Expect(err).NotTo(HaveOccurred(), "eth0 in the container at IPAM ADD")
			Expect(l.Attrs().Flags&net.FlagUp).NotTo(BeZero(), "eth0 up in the container at IPAM ADD")
			h := testutil.Handle(env.HostNS)
			br, err := h.LinkByName("cnibr0")
			Expect(err).NotTo(HaveOccurred())
			links, err := h.LinkList()
			Expect(err).NotTo(HaveOccurred())
			for _, l := range links {
				if l.Attrs().MasterIndex == br.Attrs().Index && l.Attrs().Flags&net.FlagUp != 0 {
					ports = append(ports, l.Attrs().Name)
				}
			}
		})
		Expect(out.Err).To(BeNil())
		res := testutil.ParseResult("1.1.0", out.Stdout)
		Expect(ports).To(ConsistOf(res.Interfaces[1].Name), "the host end up on cnibr0 at IPAM ADD")
		c.Command = "DEL"
		Expect(run(env.HostNS, c).Err).To(BeNil())
	})

	DescribeTable("leaves nothing behind and answers 999 when ADD panics after a step",
		func(step string) {
			stdin := netConf("1.1.0", `"isDefaultGateway": true, "ipMasq": true, "macspoofchk": true`,
				hostLocal(env.DataDir, "10.52.0.0/24", "fd00:52::/64"))
			before := snapshot()
			out := testutil.RunIn(env.HostNS, bridge.New(attach.Hooks{AfterStep: testutil.PanicAfter(step)}), call("ADD", stdin))
			testutil.ExpectCode(out, types.ErrInternal)
			Expect(out.Err.Msg).To(ContainSubstring("injected panic after step %q", step))
			Expect(snapshot()).To(Equal(before))
		},
		testutil.StepEntries(bridge.AddSteps),
	)

	It("runs GC and STATUS as the built binary with only CNI_COMMAND and CNI_PATH set", func() {
		stdin := []byte(fmt.Sprintf(`{"cniVersion": "1.1.0", "name": %q, "type": "bridge", "bridge": "cnibr0", "ipMasq": true,
			"macspoofchk": true, "cni.dev/valid-attachments": [], "ipam": %s}`, netName, hostLocal(env.DataDir, "10.53.0.0/24")))
		for _, cmd := range []string{"GC", "STATUS"} {
			var out testutil.Output
			Expect(env.HostNS.Do(func() (err error) {
				out, err = testutil.Exec("bridge", testutil.Call{Command: cmd, Stdin: stdin})
				return err
			})).To(Succeed())
			Expect(out.Err).To(BeNil(), "%s: stderr %s", cmd, out.Stderr)
		}
	})

	It("removes masquerade rules on DEL even when ipMasq was turned off since ADD", func() {
		mustAdd(env.HostNS, call("ADD", netConf("1.1.0", `"ipMasq": true`, hostLocal(env.DataDir, "10.43.0.0/24"))))
		Expect(rulesText(env.HostNS)).To(MatchRegexp(ownerRE("c1")))
		Expect(run(env.HostNS, call("DEL", netConf("1.1.0", "", hostLocal(env.DataDir, "10.43.0.0/24")))).Err).To(BeNil())
		Expect(rulesText(env.HostNS)).NotTo(MatchRegexp(ownerRE("c1")))
	})

	It("rejects an IPAM result it cannot use before configuring the container, and leaves nothing", func() {
		ipamConf := fmt.Sprintf(`{"type": "host-local", "env.DataDir": %q, "ranges": [[{"subnet": "10.44.0.0/24"}]],
			"routes": [{"dst": "0.0.0.0/0", "gw": "10.44.0.254"}]}`, env.DataDir)
		// Failing after the container step would win if the check came later.
		out := testutil.RunIn(env.HostNS, bridge.FailingAfter("container"), call("ADD", netConf("1.1.0", `"isDefaultGateway": true`, ipamConf)))
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Msg).To(ContainSubstring("isDefaultGateway"))
		Expect(out.Err.Code).To(BeEquivalentTo(types.ErrInvalidNetworkConfig))
		Expect(testutil.LinkNames(env.ContNS)).To(ConsistOf("lo"))
		Expect(testutil.LinkNames(env.HostNS)).To(ConsistOf("lo"))
		Expect(testutil.Reservations(env.DataDir)).To(BeEmpty())
	})

	It("leaves another attachment's interface of the same name alone on DEL", func() {
		h := testutil.Handle(env.ContNS)
		la := netlink.NewLinkAttrs()
		la.Name = "eth0"
		Expect(h.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "peer0"})).To(Succeed())
		l, err := h.LinkByName("eth0")
		Expect(err).NotTo(HaveOccurred())
		Expect(h.LinkSetAlias(l, "cni:other:eth0")).To(Succeed())
		stdin := netConf("1.1.0", "", hostLocal(env.DataDir, "10.45.0.0/24"))
		Expect(run(env.HostNS, call("ADD", stdin)).Err).NotTo(BeNil())
		Expect(run(env.HostNS, call("DEL", stdin)).Err).To(BeNil())
		Expect(testutil.LinkNames(env.ContNS)).To(ConsistOf("lo", "eth0", "peer0"))
	})

	It("cleans up on DEL when the netns is gone", func() {
		gone, cleanup := testutil.NewRemovableNS()
		stdin := netConf("1.1.0", `"ipMasq": true`, hostLocal(env.DataDir, "10.26.0.0/24"))
		c := call("ADD", stdin)
		c.Netns = gone.Path()
		Expect(run(env.HostNS, c).Err).To(BeNil())
		cleanup()

		c.Command = "DEL"
		Expect(run(env.HostNS, c).Err).To(BeNil())
		Expect(testutil.LinkNames(env.HostNS)).To(ConsistOf("lo", "cnibr0"))
		Expect(testutil.Reservations(env.DataDir)).To(BeEmpty())
		Expect(rulesText(env.HostNS)).NotTo(MatchRegexp(ownerRE("c1")))
		Expect(run(env.HostNS, c).Err).To(BeNil())
	})

	It("finds a leaked host veth by its alias on DEL", func() {
		stdin := netConf("1.1.0", "", hostLocal(env.DataDir, "10.27.0.0/24"))
		res := mustAdd(env.HostNS, call("ADD", stdin))
		// Move the container end out of reach, as if its namespace were
		// gone while something still held the pair.
		other := testutil.NewNS()
		h := testutil.Handle(env.ContNS)
		l, err := h.LinkByName("eth0")
		Expect(err).NotTo(HaveOccurred())
		Expect(h.LinkSetNsFd(l, int(other.Fd()))).To(Succeed())
		Expect(run(env.HostNS, call("DEL", stdin)).Err).To(BeNil())
		Expect(testutil.LinkNames(env.HostNS)).NotTo(ContainElement(res.Interfaces[1].Name))
		Expect(testutil.LinkNames(other)).To(ConsistOf("lo"))
	})

	Describe("CHECK", func() {
		var stdin []byte
		var res *current.Result
		BeforeEach(func() {
			conf := netConf("1.1.0", `"isDefaultGateway": true, "ipMasq": true`, hostLocal(env.DataDir, "10.28.0.0/24"))
			out := run(env.HostNS, call("ADD", conf))
			Expect(out.Err).To(BeNil())
			r, err := current.NewResult(out.Stdout)
			Expect(err).NotTo(HaveOccurred())
			res = r.(*current.Result)
			stdin = testutil.WithPrev(conf, out.Stdout)
			Expect(run(env.HostNS, call("CHECK", stdin)).Err).To(BeNil())
		})

		It("catches a deleted address", func() {
			h := testutil.Handle(env.ContNS)
			l, err := h.LinkByName("eth0")
			Expect(err).NotTo(HaveOccurred())
			Expect(h.AddrDel(l, mustAddr(res.IPs[0].Address.String()))).To(Succeed())
			out := run(env.HostNS, call("CHECK", stdin))
			Expect(out.Err).NotTo(BeNil())
			Expect(out.Err.Msg).To(ContainSubstring("lacks address " + res.IPs[0].Address.String()))
		})

		It("catches a deleted route", func() {
			h := testutil.Handle(env.ContNS)
			l, err := h.LinkByName("eth0")
			Expect(err).NotTo(HaveOccurred())
			Expect(h.RouteDel(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: net.ParseIP("10.28.0.1")})).To(Succeed())
			out := run(env.HostNS, call("CHECK", stdin))
			Expect(out.Err).NotTo(BeNil())
			Expect(out.Err.Msg).To(ContainSubstring("lacks route 0.0.0.0/0 via 10.28.0.1"))
		})

		It("catches a deleted veth", func() {
			Expect(testutil.Handle(env.HostNS).LinkDel(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: res.Interfaces[1].Name}})).To(Succeed())
			out := run(env.HostNS, call("CHECK", stdin))
			Expect(out.Err).NotTo(BeNil())
			Expect(out.Err.Msg).To(ContainSubstring(res.Interfaces[1].Name))
		})

		It("catches a changed MAC", func() {
			h := testutil.Handle(env.ContNS)
			l, err := h.LinkByName("eth0")
			Expect(err).NotTo(HaveOccurred())
			Expect(h.LinkSetHardwareAddr(l, net.HardwareAddr{0x02, 0, 0, 0, 0, 9})).To(Succeed())
			out := run(env.HostNS, call("CHECK", stdin))
			Expect(out.Err).NotTo(BeNil())
			Expect(out.Err.Msg).To(ContainSubstring("has MAC 02:00:00:00:00:09"))
		})

		It("catches a port taken off the bridge", func() {
			h := testutil.Handle(env.HostNS)
			l, err := h.LinkByName(res.Interfaces[1].Name)
			Expect(err).NotTo(HaveOccurred())
			Expect(h.LinkSetNoMaster(l)).To(Succeed())
			out := run(env.HostNS, call("CHECK", stdin))
			Expect(out.Err).NotTo(BeNil())
			Expect(out.Err.Msg).To(ContainSubstring("is not a port of bridge"))
		})

		It("catches a host interface that is not the container end's peer", func() {
			// Another veth on the bridge, named in prevResult as the host end.
			h := testutil.Handle(env.HostNS)
			addPort(h, "other0", "other1", "cnibr0")
			res.Interfaces[1].Name = "other0"
			out := run(env.HostNS, call("CHECK", testutil.WithPrev(netConf("1.1.0", `"isDefaultGateway": true, "ipMasq": true`,
				hostLocal(env.DataDir, "10.28.0.0/24")), resultJSON(res))))
			Expect(out.Err).NotTo(BeNil())
			Expect(out.Err.Msg).To(ContainSubstring("is not the peer of"))
		})

		It("catches a container interface that is not a veth", func() {
			// The pair replaced: a host veth of the same name on the
			// bridge, and a bridge named eth0 in the container.
			hostName := res.Interfaces[1].Name
			h := testutil.Handle(env.HostNS)
			l, err := h.LinkByName(hostName)
			Expect(err).NotTo(HaveOccurred())
			Expect(h.LinkDel(l)).To(Succeed())
			addPort(h, hostName, "stray1", "cnibr0")
			addBridge(testutil.Handle(env.ContNS), "eth0")
			out := run(env.HostNS, call("CHECK", stdin))
			Expect(out.Err).NotTo(BeNil())
			Expect(out.Err.Msg).To(ContainSubstring("not a veth"))
		})

		It("catches missing masquerade rules", func() {
			Expect(env.HostNS.Do(func() error {
				return masq.TeardownMasqAll(netfilter.Owner{Network: netName, ContainerID: "c1", IfName: "eth0"})
			})).To(Succeed())
			out := run(env.HostNS, call("CHECK", stdin))
			Expect(out.Err).NotTo(BeNil())
			Expect(out.Err.Msg).To(ContainSubstring("rule missing"))
		})

		It("catches a released IPAM reservation", func() {
			Expect(os.Remove(fmt.Sprintf("%s/%s/%s", env.DataDir, netName, res.IPs[0].Address.IP))).To(Succeed())
			out := run(env.HostNS, call("CHECK", stdin))
			Expect(out.Err).NotTo(BeNil())
			Expect(out.Err.Msg + out.Err.Details).To(ContainSubstring(res.IPs[0].Address.IP.String()))
		})
	})

	It("removes the masquerade rules and mac spoof checks of attachments GC is not told to keep", func() {
		stdin := netConf("1.1.0", `"ipMasq": true, "macspoofchk": true`, hostLocal(env.DataDir, "10.29.0.0/24"))
		cont2 := testutil.NewNS()
		mustAdd(env.HostNS, call("ADD", stdin))
		c2 := call("ADD", stdin)
		c2.ContainerID, c2.Netns = "c2", cont2.Path()
		mustAdd(env.HostNS, c2)
		Expect(testutil.Reservations(env.DataDir)).To(HaveLen(2))
		// Per attachment, upstream's layout: PREROUTING jumps to the iface
		// chain, which jumps to the -mac chain.
		Expect(strings.Count(rulesText(env.HostNS), "jump cni-br-iface-")).To(Equal(4))

		gc := call("GC", []byte(fmt.Sprintf(`{"cniVersion": "1.1.0", "name": %q, "type": "bridge", "bridge": "cnibr0", "ipMasq": true,
			"ipam": %s, "cni.dev/valid-attachments": [{"containerID": "c2", "ifname": "eth0"}]}`, netName, hostLocal(env.DataDir, "10.29.0.0/24"))))
		gc.Netns = ""
		Expect(run(env.HostNS, gc).Err).To(BeNil())
		rules := rulesText(env.HostNS)
		// iptables-save escapes the quotes of the rule comments.
		Expect(rules).NotTo(ContainSubstring(`id: \"c1\"`))
		Expect(rules).To(ContainSubstring(`id: \"c2\"`))
		Expect(testutil.Reservations(env.DataDir)).To(HaveLen(1))
		// Upstream's mac spoof names carry no network and two networks may
		// share a bridge: c1's check stays while its port lives.
		Expect(strings.Count(rules, "jump cni-br-iface-")).To(Equal(4))

		// The pod goes (its veth pair with it): the next GC collects its check.
		h := testutil.Handle(env.ContNS)
		eth0, err := h.LinkByName("eth0")
		Expect(err).NotTo(HaveOccurred())
		Expect(h.LinkDel(eth0)).To(Succeed())
		Expect(run(env.HostNS, gc).Err).To(BeNil())
		rules = rulesText(env.HostNS)
		Expect(strings.Count(rules, "jump cni-br-iface-")).To(Equal(2), "c2's mac spoof check stays, c1's is collected")
		Expect(rules).To(ContainSubstring("macspoofchk-c2-eth0"))
		Expect(rules).NotTo(ContainSubstring("macspoofchk-c1-eth0"))
	})

	It("keeps, in GC of one network, the mac spoof check of another network on the same bridge", func() {
		// Two networks with no "bridge" key both use cni0 (here both name
		// cnibr0); cniforge gc --every runs GC of each in turn.
		stdinA := netConf("1.1.0", `"macspoofchk": true`, hostLocal(env.DataDir, "10.29.0.0/24"))
		stdinB := []byte(strings.Replace(string(netConf("1.1.0", `"macspoofchk": true`, hostLocal(env.DataDir, "10.28.0.0/24"))),
			`"name": "`+netName+`"`, `"name": "other-net"`, 1))
		cont2 := testutil.NewNS()
		mustAdd(env.HostNS, call("ADD", stdinA))
		cB := call("ADD", stdinB)
		cB.ContainerID, cB.Netns = "c2", cont2.Path()
		mustAdd(env.HostNS, cB)

		gc := call("GC", []byte(strings.TrimSuffix(string(stdinA), "}")+`, "cni.dev/valid-attachments": [{"containerID": "c1", "ifname": "eth0"}]}`))
		gc.Netns = ""
		Expect(run(env.HostNS, gc).Err).To(BeNil())
		rules := rulesText(env.HostNS)
		Expect(rules).To(ContainSubstring("macspoofchk-c2-eth0"), "other-net's live attachment keeps its check")
		Expect(strings.Count(rules, "jump cni-br-iface-")).To(Equal(4), "both checks whole")
	})

	It("forwards STATUS to IPAM", func() {
		// host-local's STATUS fails on a full range only when asked to.
		ipam := strings.Replace(hostLocal(env.DataDir, "10.30.0.0/30"), `{"type"`, `{"failStatusWhenFull": true, "type"`, 1)
		c := call("STATUS", netConf("1.1.0", "", ipam))
		c.Netns = ""
		Expect(run(env.HostNS, c).Err).To(BeNil())
		// A /30 has one usable address besides the gateway's: take it.
		mustAdd(env.HostNS, call("ADD", netConf("1.1.0", "", ipam)))
		out := run(env.HostNS, c)
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Code).To(BeNumerically(">=", 50))
	})

	Describe("VLANs", Label("kernel"), func() {
		It("puts the port in the vlan, untagged, with vlan", func() {
			requireBridgeVLANFiltering()
			res := mustAdd(env.HostNS, call("ADD", netConf("1.1.0", `"vlan": 100`, hostLocal(env.DataDir, "10.31.0.0/24"))))
			vlans := portVlans(env.HostNS, res.Interfaces[1].Name)
			Expect(vlans).To(HaveKeyWithValue(uint16(100), "pvid untagged"))
			Expect(vlans).NotTo(HaveKey(uint16(1)), "default vlan removed (preserveDefaultVlan false)")
		})
		It("adds trunk vlans tagged, with the native vlan", func() {
			requireBridgeVLANFiltering()
			res := mustAdd(env.HostNS, call("ADD", netConf("1.1.0", `"vlan": 5, "vlanTrunk": [{"id": 7}, {"minID": 10, "maxID": 12}], "preserveDefaultVlan": true`,
				hostLocal(env.DataDir, "10.32.0.0/24"))))
			vlans := portVlans(env.HostNS, res.Interfaces[1].Name)
			Expect(vlans).To(HaveKeyWithValue(uint16(5), "pvid untagged"))
			for _, v := range []uint16{7, 10, 11, 12} {
				Expect(vlans).To(HaveKeyWithValue(v, "tagged"))
			}
			Expect(vlans).To(HaveKey(uint16(1)))
		})
		It("carries the native vlan untagged inside a trunk range, the rest of the range tagged, then CHECKs and DELs", func() {
			requireBridgeVLANFiltering()
			stdin := netConf("1.1.0", `"vlan": 11, "vlanTrunk": [{"minID": 10, "maxID": 12, "id": 20}]`, hostLocal(env.DataDir, "10.32.0.0/24"))
			out := testutil.MustRunIn(env.HostNS, bridge.Plugin, call("ADD", stdin))
			res, err := current.NewResult(out.Stdout)
			Expect(err).NotTo(HaveOccurred())
			vlans := portVlans(env.HostNS, res.(*current.Result).Interfaces[1].Name)
			Expect(vlans).To(Equal(map[uint16]string{10: "tagged", 11: "pvid untagged", 12: "tagged", 20: "tagged"}))
			Expect(run(env.HostNS, call("CHECK", []byte(strings.TrimSuffix(string(stdin), "}")+`, "prevResult": `+string(out.Stdout)+`}`))).Err).To(BeNil())
			Expect(run(env.HostNS, call("DEL", stdin)).Err).To(BeNil())
		})
		It("keeps the per-vlan gateway it created when another attachment joined before the rollback", func() {
			requireBridgeVLANFiltering()
			h := testutil.Handle(env.HostNS)
			joinBridge := func() {
				defer GinkgoRecover()
				// What a concurrent ADD on the VLAN would have done.
				addPort(h, "other0", "otherpeer0", "cnibr0")
			}
			stdin := netConf("1.1.0", `"vlan": 300, "isGateway": true`, hostLocal(env.DataDir, "10.46.0.0/24"))
			out := testutil.RunIn(env.HostNS, bridge.FailingAfterWith("gateway", joinBridge), call("ADD", stdin))
			Expect(out.Err).NotTo(BeNil())
			Expect(testutil.LinkNames(env.HostNS)).To(ContainElements("cnibr0", "cnibr0.300", "other0"))
			Expect(testutil.Addrs(env.HostNS, "cnibr0.300")).To(ConsistOf("10.46.0.1/24"))
			Expect(testutil.LinkNames(env.ContNS)).To(ConsistOf("lo"))
		})
		It("puts the gateway on a per-vlan interface", func() {
			requireBridgeVLANFiltering()
			mustAdd(env.HostNS, call("ADD", netConf("1.1.0", `"vlan": 200, "isGateway": true`, hostLocal(env.DataDir, "10.33.0.0/24"))))
			Expect(testutil.Addrs(env.HostNS, "cnibr0.200")).To(ConsistOf("10.33.0.1/24"))
			Expect(testutil.Ping(env.ContNS, "10.33.0.1")).To(Succeed())
		})
	})

	Describe("bad input", func() {
		testutil.RefusalSpecs(func(c testutil.Call) testutil.Output { return run(env.HostNS, c) },
			func(ver string) testutil.Call {
				return call("ADD", netConf(ver, "", hostLocal(env.DataDir, "10.34.0.0/24")))
			},
			func() { Expect(testutil.LinkNames(env.HostNS)).To(ConsistOf("lo")) })
		It("rejects invalid values with code 7 naming the key, before touching the kernel", func() {
			out := run(env.HostNS, call("ADD", netConf("1.1.0", `"vlan": 5000`, hostLocal(env.DataDir, "10.35.0.0/24"))))
			testutil.ExpectCode(out, types.ErrInvalidNetworkConfig)
			Expect(out.Err.Msg).To(ContainSubstring("vlan: 5000"))
			Expect(testutil.LinkNames(env.HostNS)).To(ConsistOf("lo"))
			Expect(testutil.Reservations(env.DataDir)).To(BeEmpty())
		})
		It("rejects a path that is not a netns with code 8", func() {
			c := call("ADD", netConf("1.1.0", "", hostLocal(env.DataDir, "10.36.0.0/24")))
			c.Netns = "/proc/self/status"
			out := run(env.HostNS, c)
			testutil.ExpectCode(out, types.ErrInvalidNetNS)
			Expect(testutil.LinkNames(env.HostNS)).To(ConsistOf("lo"))
		})
		It("rejects CHECK without prevResult with code 7", func() {
			out := run(env.HostNS, call("CHECK", netConf("1.1.0", "", "")))
			testutil.ExpectCode(out, types.ErrInvalidNetworkConfig)
			Expect(out.Err.Msg).To(ContainSubstring("prevResult"))
		})
	})

	It("works as the built binary", func() {
		var out testutil.Output
		Expect(env.HostNS.Do(func() (err error) {
			out, err = testutil.Exec("bridge", call("ADD", netConf("1.1.0", `"isGateway": true`, hostLocal(env.DataDir, "10.37.0.0/24"))))
			return err
		})).To(Succeed())
		Expect(out.Err).To(BeNil(), "stderr: %s", out.Stderr)
		Expect(testutil.Ping(env.ContNS, "10.37.0.1")).To(Succeed())
	})
})

// ownedRules is every line of rulesText that belongs to container id: its
// masquerade rules and chains, and any MAC spoof-check chain.
func ownedRules(n *ns.NetNS, id string) []string {
	GinkgoHelper()
	re := regexp.MustCompile(ownerRE(id))
	var out []string
	for _, line := range strings.Split(rulesText(n), "\n") {
		if re.MatchString(line) || strings.Contains(line, "cni-br-iface") {
			out = append(out, line)
		}
	}
	return out
}

// ownerRE matches container id as a rule owner: `id: "c1"` in iptables
// comments (quotes escaped by iptables-save), `id: c1"` at the end of an
// nftables comment; a bare "c1" could be hex inside a hashed chain name.
func ownerRE(id string) string {
	return `id: (\\"` + regexp.QuoteMeta(id) + `\\"|` + regexp.QuoteMeta(id) + `")`
}

func resultJSON(r *current.Result) []byte {
	GinkgoHelper()
	b, err := json.Marshal(r)
	Expect(err).NotTo(HaveOccurred())
	return b
}
