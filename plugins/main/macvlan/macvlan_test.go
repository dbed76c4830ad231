package macvlan_test

import (
	"encoding/json"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/main/macvlan"
)

const (
	netName = "macvlan-net"
	peerIP  = "10.1.1.1"
)

// conf is the test network config: keys merged over a macvlan on master0
// with host-local handing out 10.1.1.10-10.1.1.50 (ipam nil: left out).
func conf(ver, dataDir string, keys map[string]any) []byte {
	GinkgoHelper()
	c := map[string]any{
		"cniVersion": ver, "name": netName, "type": "macvlan", "master": "master0",
		"ipam": map[string]any{"type": "host-local", "dataDir": dataDir, "ranges": [][]map[string]string{{{
			"subnet": "10.1.1.0/24", "rangeStart": "10.1.1.10", "rangeEnd": "10.1.1.50", "gateway": peerIP,
		}}}, "routes": []map[string]string{{"dst": "10.200.0.0/16"}}},
		"dns": map[string]any{"nameservers": []string{"10.1.1.53"}},
	}
	for k, v := range keys {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	b, err := json.Marshal(c)
	Expect(err).NotTo(HaveOccurred())
	return b
}

var _ = Describe("macvlan", func() {
	var (
		hostNS, contNS, peerNS *ns.NetNS
		dataDir                string
	)
	BeforeEach(func() {
		hostNS, contNS, peerNS = testutil.NewNS(), testutil.NewNS(), testutil.NewNS()
		dataDir = GinkgoT().TempDir()
		// master0 in the stand-in host is wired to peer0 (10.1.1.1) in a
		// peer namespace: the master's wire.
		Expect(testutil.ConnectNS(
			testutil.VethEnd{NS: hostNS, Name: "master0"},
			testutil.VethEnd{NS: peerNS, Name: "peer0", Addrs: []string{peerIP + "/24"}},
		)).To(Succeed())
	})

	call := func(cmd, id string, n *ns.NetNS, stdin []byte) testutil.Call {
		c := testutil.Call{Command: cmd, ContainerID: id, IfName: "eth0", Stdin: stdin}
		if n != nil {
			c.Netns = n.Path()
		}
		return c
	}
	run := func(c testutil.Call) testutil.Output {
		GinkgoHelper()
		return testutil.RunIn(hostNS, macvlan.Plugin, c)
	}
	add := func(ver, id string, n *ns.NetNS, stdin []byte) ([]byte, *current.Result) {
		GinkgoHelper()
		out := testutil.MustRunIn(hostNS, macvlan.Plugin, call("ADD", id, n, stdin))
		return out.Stdout, testutil.ParseResult(ver, out.Stdout)
	}
	snapshot := func() testutil.Snapshot {
		GinkgoHelper()
		return testutil.TakeSnapshot(hostNS, contNS, dataDir)
	}
	macOf := func(n *ns.NetNS, name string) string {
		GinkgoHelper()
		l, err := testutil.Handle(n).LinkByName(name)
		Expect(err).NotTo(HaveOccurred())
		return l.Attrs().HardwareAddr.String()
	}

	DescribeTableSubtree("every spec version", func(ver string) {
		It("puts a macvlan on the master in the container and reaches the master's peer", func() {
			stdin := conf(ver, dataDir, nil)
			_, res := add(ver, "c1", contNS, stdin)
			Expect(res.IPs).To(HaveLen(1))
			Expect(res.IPs[0].Address.String()).To(MatchRegexp(`^10\.1\.1\.\d+/24$`))
			Expect(res.Routes).To(HaveLen(1))
			Expect(res.DNS.Nameservers).To(Equal([]string{"10.1.1.53"}))
			if testutil.AtLeast(ver, "0.3.0") {
				Expect(res.Interfaces).To(HaveLen(1))
				Expect(res.Interfaces[0].Name).To(Equal("eth0"))
				Expect(res.Interfaces[0].Sandbox).To(Equal(contNS.Path()))
				Expect(res.Interfaces[0].Mac).To(Equal(macOf(contNS, "eth0")))
				Expect(*res.IPs[0].Interface).To(Equal(0))
			}
			l, err := testutil.Handle(contNS).LinkByName("eth0")
			Expect(err).NotTo(HaveOccurred())
			Expect(l.Type()).To(Equal("macvlan"))
			Expect(l.(*netlink.Macvlan).Mode).To(Equal(netlink.MACVLAN_MODE_BRIDGE))
			Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo", "master0"))
			Expect(testutil.Addrs(contNS, "eth0")).To(ConsistOf(res.IPs[0].Address.String()))
			Expect(testutil.Routes(contNS)).To(ContainElement("10.200.0.0/16 via " + peerIP + " dev eth0"))
			Expect(contNS.Do(func() error {
				v, err := sysctl("net/ipv4/conf/eth0/arp_notify")
				if err == nil && v != "1" {
					err = errorf("arp_notify is %q", v)
				}
				return err
			})).To(Succeed())
			Expect(testutil.Ping(contNS, peerIP)).To(Succeed())
		})

		It("survives ADD, CHECK, DEL, DEL and leaves nothing behind", func() {
			stdin := conf(ver, dataDir, nil)
			before := snapshot()
			out, _ := add(ver, "c1", contNS, stdin)
			if testutil.AtLeast(ver, "0.4.0") {
				testutil.MustRunIn(hostNS, macvlan.Plugin, call("CHECK", "c1", contNS, testutil.WithPrev(stdin, out)))
			}
			testutil.MustRunIn(hostNS, macvlan.Plugin, call("DEL", "c1", contNS, stdin))
			Expect(snapshot()).To(Equal(before))
			testutil.MustRunIn(hostNS, macvlan.Plugin, call("DEL", "c1", contNS, stdin))
			Expect(snapshot()).To(Equal(before))
		})

		It("releases the address on DEL without a netns and with the netns gone", func() {
			stdin := conf(ver, dataDir, nil)
			gone, remove, err := testutil.CreateNS()
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(remove)
			add(ver, "c1", gone, stdin)
			add(ver, "c2", contNS, stdin)
			Expect(testutil.Reservations(dataDir)).To(HaveLen(2))
			path := gone.Path()
			Expect(gone.Close()).To(Succeed())
			Expect(remove()).To(Succeed())
			testutil.MustRunIn(hostNS, macvlan.Plugin, testutil.Call{Command: "DEL", ContainerID: "c1", Netns: path, IfName: "eth0", Stdin: stdin})
			testutil.MustRunIn(hostNS, macvlan.Plugin, call("DEL", "c2", nil, stdin))
			Expect(testutil.Reservations(dataDir)).To(BeEmpty())
			Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo", "master0"))
		})
	}, testutil.VersionEntries())

	Describe("modes", func() {
		It("bridge: two containers on one master reach each other and the peer", func() {
			other := testutil.NewNS()
			_, a := add("1.1.0", "a", contNS, conf("1.1.0", dataDir, nil))
			_, b := add("1.1.0", "b", other, conf("1.1.0", dataDir, nil))
			Expect(testutil.Ping(contNS, b.IPs[0].Address.IP.String())).To(Succeed())
			Expect(testutil.Ping(other, a.IPs[0].Address.IP.String())).To(Succeed())
			Expect(testutil.Ping(other, peerIP)).To(Succeed())
		})

		It("private: container-to-container traffic is dropped, the peer is reached", func() {
			other := testutil.NewNS()
			keys := map[string]any{"mode": "private"}
			add("1.1.0", "a", contNS, conf("1.1.0", dataDir, keys))
			_, b := add("1.1.0", "b", other, conf("1.1.0", dataDir, keys))
			Expect(testutil.Ping(contNS, peerIP)).To(Succeed())
			Expect(testutil.Ping(other, peerIP)).To(Succeed())
			Expect(testutil.Ping(contNS, b.IPs[0].Address.IP.String())).NotTo(Succeed())
		})

		It("passthru: the one macvlan of the master reaches the peer; CHECK sees the mode", func() {
			stdin := conf("1.1.0", dataDir, map[string]any{"mode": "passthru"})
			out, _ := add("1.1.0", "a", contNS, stdin)
			l, err := testutil.Handle(contNS).LinkByName("eth0")
			Expect(err).NotTo(HaveOccurred())
			Expect(l.(*netlink.Macvlan).Mode).To(Equal(netlink.MACVLAN_MODE_PASSTHRU))
			Expect(testutil.Ping(contNS, peerIP)).To(Succeed())
			testutil.MustRunIn(hostNS, macvlan.Plugin, call("CHECK", "a", contNS, testutil.WithPrev(stdin, out)))
			// The same result, checked against a config in bridge mode.
			wrong := testutil.RunIn(hostNS, macvlan.Plugin, call("CHECK", "a", contNS, testutil.WithPrev(conf("1.1.0", dataDir, nil), out)))
			Expect(wrong.Err).NotTo(BeNil())
			Expect(wrong.Err.Msg).To(ContainSubstring(`mode "passthru"`))
		})

		It("vepa with bcqueuelen sets both", func() {
			add("1.1.0", "a", contNS, conf("1.1.0", dataDir, map[string]any{"mode": "vepa", "bcqueuelen": 123}))
			l, err := testutil.Handle(contNS).LinkByName("eth0")
			Expect(err).NotTo(HaveOccurred())
			Expect(l.(*netlink.Macvlan).Mode).To(Equal(netlink.MACVLAN_MODE_VEPA))
			Expect(l.(*netlink.Macvlan).BCQueueLen).To(BeEquivalentTo(123))
			Expect(testutil.Ping(contNS, peerIP)).To(Succeed())
		})
	})

	It("linkInContainer: the master lives in the container; CHECK and DEL work there", func() {
		outside := testutil.NewNS()
		Expect(testutil.ConnectNS(
			testutil.VethEnd{NS: contNS, Name: "cmaster"},
			testutil.VethEnd{NS: outside, Name: "opeer", Addrs: []string{peerIP + "/24"}},
		)).To(Succeed())
		stdin := conf("1.1.0", dataDir, map[string]any{"master": "cmaster", "linkInContainer": true})
		out, _ := add("1.1.0", "c1", contNS, stdin)
		Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo", "cmaster", "eth0"))
		Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo", "master0"))
		Expect(testutil.Ping(contNS, peerIP)).To(Succeed())
		testutil.MustRunIn(hostNS, macvlan.Plugin, call("CHECK", "c1", contNS, testutil.WithPrev(stdin, out)))
		testutil.MustRunIn(hostNS, macvlan.Plugin, call("DEL", "c1", contNS, stdin))
		Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo", "cmaster"))
		Expect(testutil.Reservations(dataDir)).To(BeEmpty())
	})

	It("takes the default route's interface when master is not set, and says to set it without one", func() {
		stdin := conf("1.1.0", dataDir, map[string]any{"master": nil})
		out := run(call("ADD", "c1", contNS, stdin))
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Code).To(BeEquivalentTo(types.ErrInvalidNetworkConfig))
		Expect(out.Err.Msg).To(ContainSubstring(`set "master"`))

		h := testutil.Handle(hostNS)
		m, err := h.LinkByName("master0")
		Expect(err).NotTo(HaveOccurred())
		Expect(h.AddrAdd(m, mustAddr("10.1.1.2/24"))).To(Succeed())
		Expect(h.RouteAdd(&netlink.Route{Gw: parseIP(peerIP)})).To(Succeed())
		add("1.1.0", "c1", contNS, stdin)
		Expect(testutil.Ping(contNS, peerIP)).To(Succeed())
	})

	It("dual stack: sets arp_notify and ndisc_notify, and the IPv6 address is usable at once (no DAD wait)", func() {
		h := testutil.Handle(peerNS)
		p, err := h.LinkByName("peer0")
		Expect(err).NotTo(HaveOccurred())
		Expect(h.AddrAdd(p, &netlink.Addr{IPNet: mustAddr("fd00:1::1/64").IPNet, Flags: 0x02 /* IFA_F_NODAD */})).To(Succeed())
		ipam := map[string]any{"type": "host-local", "dataDir": dataDir, "ranges": [][]map[string]string{
			{{"subnet": "10.1.1.0/24", "rangeStart": "10.1.1.10", "rangeEnd": "10.1.1.50"}},
			{{"subnet": "fd00:1::/64", "rangeStart": "fd00:1::10", "rangeEnd": "fd00:1::50"}},
		}}
		_, res := add("1.1.0", "c1", contNS, conf("1.1.0", dataDir, map[string]any{"ipam": ipam}))
		Expect(res.IPs).To(HaveLen(2))
		Expect(contNS.Do(func() error {
			for _, k := range []string{"net/ipv4/conf/eth0/arp_notify", "net/ipv6/conf/eth0/ndisc_notify"} {
				v, err := sysctl(k)
				if err != nil {
					return err
				}
				if v != "1" {
					return errorf("%s is %q", k, v)
				}
			}
			return nil
		})).To(Succeed())
		// Not tentative: the address is there without the DAD flag.
		addrs, err := testutil.Handle(contNS).AddrList(nil, netlink.FAMILY_V6)
		Expect(err).NotTo(HaveOccurred())
		found := false
		for _, a := range addrs {
			if a.IP.Equal(res.IPs[1].Address.IP) {
				found = true
				Expect(a.Flags & 0x40 /* IFA_F_TENTATIVE */).To(BeZero())
			}
		}
		Expect(found).To(BeTrue())
		Expect(testutil.Ping(contNS, "fd00:1::1")).To(Succeed())
	})

	DescribeTable("takes the MAC from each source", func(keys map[string]any, cniArgs, want string) {
		stdin := conf("1.1.0", dataDir, keys)
		c := call("ADD", "c1", contNS, stdin)
		c.Args = cniArgs
		out := testutil.MustRunIn(hostNS, macvlan.Plugin, c)
		res := testutil.ParseResult("1.1.0", out.Stdout)
		Expect(res.Interfaces[0].Mac).To(Equal(want))
		Expect(macOf(contNS, "eth0")).To(Equal(want))
		Expect(testutil.Ping(contNS, peerIP)).To(Succeed())
		testutil.MustRunIn(hostNS, macvlan.Plugin, call("CHECK", "c1", contNS, testutil.WithPrev(stdin, out.Stdout)))
	},
		Entry("runtimeConfig.mac", map[string]any{"runtimeConfig": map[string]any{"mac": "02:00:00:00:00:01"}, "mac": "02:00:00:00:00:04"}, "MAC=02:00:00:00:00:03", "02:00:00:00:00:01"),
		Entry("args.cni.mac", map[string]any{"args": map[string]any{"cni": map[string]any{"mac": "02:00:00:00:00:02"}}, "mac": "02:00:00:00:00:04"}, "MAC=02:00:00:00:00:03", "02:00:00:00:00:02"),
		Entry("CNI_ARGS MAC", map[string]any{"mac": "02:00:00:00:00:04"}, "IgnoreUnknown=1;MAC=02:00:00:00:00:03", "02:00:00:00:00:03"),
		Entry("mac", map[string]any{"mac": "02:00:00:00:00:04"}, "", "02:00:00:00:00:04"),
	)

	It("refuses an mtu above the master's (code 7, both numbers) and creates nothing", func() {
		before := snapshot()
		out := run(call("ADD", "c1", contNS, conf("1.1.0", dataDir, map[string]any{"mtu": 9000})))
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Code).To(BeEquivalentTo(types.ErrInvalidNetworkConfig))
		Expect(out.Err.Msg).To(And(ContainSubstring("9000"), ContainSubstring("1500"), ContainSubstring("master0")))
		Expect(snapshot()).To(Equal(before))
		// An mtu below it is applied.
		add("1.1.0", "c1", contNS, conf("1.1.0", dataDir, map[string]any{"mtu": 1400}))
		l, err := testutil.Handle(contNS).LinkByName("eth0")
		Expect(err).NotTo(HaveOccurred())
		Expect(l.Attrs().MTU).To(Equal(1400))
	})

	It("is layer 2 only with ipam {} or none", func() {
		for i, keys := range []map[string]any{{"ipam": map[string]any{}}, {"ipam": nil}} {
			n := testutil.NewNS()
			_, res := add("1.1.0", "c"+string(rune('0'+i)), n, conf("1.1.0", dataDir, keys))
			Expect(res.IPs).To(BeEmpty())
			Expect(testutil.Addrs(n, "eth0")).To(BeEmpty())
			l, err := testutil.Handle(n).LinkByName("eth0")
			Expect(err).NotTo(HaveOccurred())
			Expect(l.Attrs().Flags & (1 << 0)).NotTo(BeZero()) // IFF_UP
		}
	})

	It("refuses a CNI_IFNAME the container already has and leaves nothing", func() {
		h := testutil.Handle(contNS)
		Expect(h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}})).To(Succeed())
		before := snapshot()
		out := run(call("ADD", "c1", contNS, conf("1.1.0", dataDir, nil)))
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Msg).To(ContainSubstring(`"eth0"`))
		Expect(snapshot()).To(Equal(before))
		// And DEL leaves the other plugin's eth0 alone.
		testutil.MustRunIn(hostNS, macvlan.Plugin, call("DEL", "c1", contNS, conf("1.1.0", dataDir, nil)))
		Expect(testutil.LinkNames(contNS)).To(ContainElement("eth0"))
	})

	Describe("a failure injected after each ADD step leaves nothing behind", func() {
		for _, step := range macvlan.AddSteps {
			It("error after "+step, func() {
				stdin := conf("1.1.0", dataDir, nil)
				before := snapshot()
				out := testutil.RunIn(hostNS, macvlan.New(attach.Hooks{AfterStep: testutil.FailAfter(step, nil)}), call("ADD", "c1", contNS, stdin))
				Expect(out.Err).NotTo(BeNil())
				Expect(out.Err.Msg).To(ContainSubstring("injected failure"))
				Expect(snapshot()).To(Equal(before))
				add("1.1.0", "c1", contNS, stdin)
			})
			It("panic after "+step, func() {
				before := snapshot()
				out := testutil.RunIn(hostNS, macvlan.New(attach.Hooks{AfterStep: testutil.PanicAfter(step)}), call("ADD", "c1", contNS, conf("1.1.0", dataDir, nil)))
				Expect(out.Err).NotTo(BeNil())
				Expect(out.Err.Code).To(BeEquivalentTo(types.ErrInternal))
				Expect(snapshot()).To(Equal(before))
			})
		}
	})

	DescribeTable("bad input is refused with its code and creates nothing", func(stdin func(dataDir string) []byte, cniArgs string, code int, msg string) {
		before := snapshot()
		c := call("ADD", "c1", contNS, stdin(dataDir))
		c.Args = cniArgs
		out := run(c)
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Code).To(BeEquivalentTo(code))
		Expect(out.Err.Msg + " " + out.Err.Details).To(ContainSubstring(msg))
		Expect(snapshot()).To(Equal(before))
	},
		Entry("not JSON (6)", func(string) []byte { return []byte(`{"name": `) }, "", 6, "unmarshal"),
		Entry("bad CNI_ARGS (4)", func(d string) []byte { return conf("1.1.0", d, nil) }, "MAC=nope", 4, "CNI_ARGS MAC"),
		Entry("unsupported version (1)", func(d string) []byte { return conf("9.9.9", d, nil) }, "", 1, "9.9.9"),
		Entry("bad mode (7)", func(d string) []byte { return conf("1.1.0", d, map[string]any{"mode": "l3"}) }, "", 7, `mode: "l3"`),
		Entry("missing master (7)", func(d string) []byte { return conf("1.1.0", d, map[string]any{"master": "nope0"}) }, "", 7, `"nope0"`),
		Entry("ipam type not in CNI_PATH (7)", func(d string) []byte {
			return conf("1.1.0", d, map[string]any{"ipam": map[string]any{"type": "no-such-ipam"}})
		}, "", 7, "no-such-ipam"),
	)

	It("runs GC and STATUS with only CNI_COMMAND and CNI_PATH, forwarding them to IPAM", func() {
		_, res := add("1.1.0", "c1", contNS, conf("1.1.0", dataDir, nil))
		Expect(testutil.Reservations(dataDir)).To(HaveLen(1))
		testutil.MustRunIn(hostNS, macvlan.Plugin, testutil.Call{Command: "STATUS", Stdin: conf("1.1.0", dataDir, nil)})
		gc := conf("1.1.0", dataDir, map[string]any{"cni.dev/valid-attachments": []map[string]string{}})
		testutil.MustRunIn(hostNS, macvlan.Plugin, testutil.Call{Command: "GC", Stdin: gc})
		Expect(testutil.Reservations(dataDir)).To(BeEmpty(), "GC released %s", res.IPs[0].Address.IP)
	})
})

func sysctl(name string) (string, error) {
	b, err := readFile("/proc/sys/" + name)
	return strings.TrimSpace(string(b)), err
}
