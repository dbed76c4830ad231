package ipvlan_test

import (
	"encoding/json"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/kernelfeature"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/main/ipvlan"
)

const (
	netName = "ipvlan-net"
	peerIP  = "10.3.3.1"
)

// conf is the test config: keys merged over an ipvlan on master0 with
// host-local handing out 10.3.3.10-10.3.3.50 (a nil value drops the key).
func conf(ver, dataDir string, keys map[string]any) []byte {
	GinkgoHelper()
	c := map[string]any{
		"cniVersion": ver, "name": netName, "type": "ipvlan", "master": "master0",
		"ipam": map[string]any{"type": "host-local", "dataDir": dataDir, "ranges": [][]map[string]string{{{
			"subnet": "10.3.3.0/24", "rangeStart": "10.3.3.10", "rangeEnd": "10.3.3.50", "gateway": peerIP,
		}}}, "routes": []map[string]string{{"dst": "10.200.0.0/16"}}},
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

// Every spec here makes ipvlan links: they run where the kernel has them
// (the VM lane), and skip with the reason elsewhere.
var _ = Describe("ipvlan", Label(kernelfeature.Label), func() {
	var (
		hostNS, contNS, peerNS *ns.NetNS
		dataDir                string
	)
	BeforeEach(func() {
		kernelfeature.Require(kernelfeature.IPVlan)
		hostNS, contNS, peerNS = testutil.NewNS(), testutil.NewNS(), testutil.NewNS()
		dataDir = GinkgoT().TempDir()
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
		return testutil.RunIn(hostNS, ipvlan.Plugin, c)
	}
	add := func(ver, id string, n *ns.NetNS, stdin []byte) ([]byte, *current.Result) {
		GinkgoHelper()
		out := testutil.MustRunIn(hostNS, ipvlan.Plugin, call("ADD", id, n, stdin))
		return out.Stdout, testutil.ParseResult(ver, out.Stdout)
	}
	snapshot := func() testutil.Snapshot {
		GinkgoHelper()
		return testutil.TakeSnapshot(hostNS, contNS, dataDir)
	}
	mode := func(n *ns.NetNS) netlink.IPVlanMode {
		GinkgoHelper()
		l, err := testutil.Handle(n).LinkByName("eth0")
		Expect(err).NotTo(HaveOccurred())
		Expect(l.Type()).To(Equal("ipvlan"))
		return l.(*netlink.IPVlan).Mode
	}

	DescribeTableSubtree("every spec version", func(ver string) {
		It("puts an l2 ipvlan on the master in the container and reaches the master's peer", func() {
			_, res := add(ver, "c1", contNS, conf(ver, dataDir, nil))
			Expect(res.IPs).To(HaveLen(1))
			if testutil.AtLeast(ver, "0.3.0") {
				Expect(res.Interfaces).To(HaveLen(1))
				Expect(res.Interfaces[0].Name).To(Equal("eth0"))
				Expect(res.Interfaces[0].Sandbox).To(Equal(contNS.Path()))
				Expect(*res.IPs[0].Interface).To(Equal(0))
			}
			Expect(mode(contNS)).To(Equal(netlink.IPVLAN_MODE_L2))
			Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo", "master0"))
			Expect(testutil.Addrs(contNS, "eth0")).To(ConsistOf(res.IPs[0].Address.String()))
			Expect(testutil.Ping(contNS, peerIP)).To(Succeed())
		})

		It("survives ADD, CHECK, DEL, DEL and leaves nothing behind", func() {
			stdin := conf(ver, dataDir, nil)
			before := snapshot()
			out, _ := add(ver, "c1", contNS, stdin)
			if testutil.AtLeast(ver, "0.4.0") {
				testutil.MustRunIn(hostNS, ipvlan.Plugin, call("CHECK", "c1", contNS, testutil.WithPrev(stdin, out)))
			}
			testutil.MustRunIn(hostNS, ipvlan.Plugin, call("DEL", "c1", contNS, stdin))
			Expect(snapshot()).To(Equal(before))
			testutil.MustRunIn(hostNS, ipvlan.Plugin, call("DEL", "c1", contNS, stdin))
			Expect(snapshot()).To(Equal(before))
		})

		It("releases the address on DEL without a netns and with the netns gone", func() {
			stdin := conf(ver, dataDir, nil)
			gone, remove, err := testutil.CreateNS()
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(remove)
			add(ver, "c1", gone, stdin)
			add(ver, "c2", contNS, stdin)
			path := gone.Path()
			Expect(gone.Close()).To(Succeed())
			Expect(remove()).To(Succeed())
			testutil.MustRunIn(hostNS, ipvlan.Plugin, testutil.Call{Command: "DEL", ContainerID: "c1", Netns: path, IfName: "eth0", Stdin: stdin})
			testutil.MustRunIn(hostNS, ipvlan.Plugin, call("DEL", "c2", nil, stdin))
			Expect(testutil.Reservations(dataDir)).To(BeEmpty())
			Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo", "master0"))
		})
	}, testutil.VersionEntries())

	DescribeTable("two containers on one master reach each other", func(m string, want netlink.IPVlanMode, peerToo bool) {
		other := testutil.NewNS()
		stdin := conf("1.1.0", dataDir, map[string]any{"mode": m})
		outA, a := add("1.1.0", "a", contNS, stdin)
		_, b := add("1.1.0", "b", other, stdin)
		Expect(mode(contNS)).To(Equal(want))
		Expect(testutil.Ping(contNS, b.IPs[0].Address.IP.String())).To(Succeed())
		Expect(testutil.Ping(other, a.IPs[0].Address.IP.String())).To(Succeed())
		if peerToo {
			Expect(testutil.Ping(other, peerIP)).To(Succeed())
		}
		testutil.MustRunIn(hostNS, ipvlan.Plugin, call("CHECK", "a", contNS, testutil.WithPrev(stdin, outA)))
		// The same result, checked against a config in another mode.
		otherMode := "l2"
		if m == "l2" {
			otherMode = "l3"
		}
		wrong := run(call("CHECK", "a", contNS, testutil.WithPrev(conf("1.1.0", dataDir, map[string]any{"mode": otherMode}), outA)))
		Expect(wrong.Err).NotTo(BeNil())
		Expect(wrong.Err.Msg).To(ContainSubstring(`mode "` + m + `"`))
	},
		Entry("l2", "l2", netlink.IPVLAN_MODE_L2, true),
		Entry("l3", "l3", netlink.IPVLAN_MODE_L3, false),
		Entry("l3s", "l3s", netlink.IPVLAN_MODE_L3S, false),
	)

	It("chained: takes the master and the addresses from prevResult", func() {
		prev := `{"cniVersion": "1.1.0", "interfaces": [{"name": "master0"}], "ips": [{"address": "10.3.3.77/24", "interface": 0}]}`
		stdin := conf("1.1.0", dataDir, map[string]any{"master": nil, "ipam": nil, "prevResult": json.RawMessage(prev)})
		_, res := add("1.1.0", "c1", contNS, stdin)
		Expect(res.IPs).To(HaveLen(1))
		Expect(res.IPs[0].Address.String()).To(Equal("10.3.3.77/24"))
		Expect(*res.IPs[0].Interface).To(Equal(0))
		Expect(res.Interfaces).To(HaveLen(1))
		Expect(res.Interfaces[0].Name).To(Equal("eth0"))
		Expect(testutil.Addrs(contNS, "eth0")).To(ConsistOf("10.3.3.77/24"))
		Expect(testutil.Ping(contNS, peerIP)).To(Succeed())
		Expect(testutil.Reservations(dataDir)).To(BeEmpty())

		// prevResult with two interfaces names no master.
		two := `{"cniVersion": "1.1.0", "interfaces": [{"name": "a"}, {"name": "b"}], "ips": []}`
		out := run(call("ADD", "c2", testutil.NewNS(), conf("1.1.0", dataDir, map[string]any{"master": nil, "ipam": nil, "prevResult": json.RawMessage(two)})))
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Code).To(BeEquivalentTo(types.ErrInvalidNetworkConfig))
		Expect(out.Err.Msg).To(ContainSubstring("2 interfaces"))
	})

	It("linkInContainer: the master lives in the container", func() {
		outside := testutil.NewNS()
		Expect(testutil.ConnectNS(
			testutil.VethEnd{NS: contNS, Name: "cmaster"},
			testutil.VethEnd{NS: outside, Name: "opeer", Addrs: []string{peerIP + "/24"}},
		)).To(Succeed())
		stdin := conf("1.1.0", dataDir, map[string]any{"master": "cmaster", "linkInContainer": true})
		out, _ := add("1.1.0", "c1", contNS, stdin)
		Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo", "cmaster", "eth0"))
		Expect(testutil.Ping(contNS, peerIP)).To(Succeed())
		testutil.MustRunIn(hostNS, ipvlan.Plugin, call("CHECK", "c1", contNS, testutil.WithPrev(stdin, out)))
		testutil.MustRunIn(hostNS, ipvlan.Plugin, call("DEL", "c1", contNS, stdin))
		Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo", "cmaster"))
	})

	It("refuses an mtu above the master's (code 7, both numbers) and creates nothing", func() {
		before := snapshot()
		out := run(call("ADD", "c1", contNS, conf("1.1.0", dataDir, map[string]any{"mtu": 9000})))
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Code).To(BeEquivalentTo(types.ErrInvalidNetworkConfig))
		Expect(out.Err.Msg).To(And(ContainSubstring("9000"), ContainSubstring("1500")))
		Expect(snapshot()).To(Equal(before))
	})

	It("is layer 2 only with ipam {}", func() {
		_, res := add("1.1.0", "c1", contNS, conf("1.1.0", dataDir, map[string]any{"ipam": map[string]any{}}))
		Expect(res.IPs).To(BeEmpty())
		Expect(testutil.Addrs(contNS, "eth0")).To(BeEmpty())
	})

	Describe("a failure injected after each ADD step leaves nothing behind", func() {
		for _, step := range ipvlan.AddSteps {
			It("error after "+step, func() {
				before := snapshot()
				out := testutil.RunIn(hostNS, ipvlan.New(attach.Hooks{AfterStep: testutil.FailAfter(step, nil)}), call("ADD", "c1", contNS, conf("1.1.0", dataDir, nil)))
				Expect(out.Err).NotTo(BeNil())
				Expect(out.Err.Msg).To(ContainSubstring("injected failure"))
				Expect(snapshot()).To(Equal(before))
			})
			It("panic after "+step, func() {
				before := snapshot()
				out := testutil.RunIn(hostNS, ipvlan.New(attach.Hooks{AfterStep: testutil.PanicAfter(step)}), call("ADD", "c1", contNS, conf("1.1.0", dataDir, nil)))
				Expect(out.Err).NotTo(BeNil())
				Expect(out.Err.Code).To(BeEquivalentTo(types.ErrInternal))
				Expect(snapshot()).To(Equal(before))
			})
		}
	})

	DescribeTable("bad input is refused with its code and creates nothing", func(stdin func(string) []byte, noNetns bool, code int, msg string) {
		before := snapshot()
		c := call("ADD", "c1", contNS, stdin(dataDir))
		if noNetns {
			c.Netns = ""
		}
		out := run(c)
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Code).To(BeEquivalentTo(code))
		Expect(out.Err.Msg + " " + out.Err.Details).To(ContainSubstring(msg))
		Expect(snapshot()).To(Equal(before))
	},
		Entry("not JSON (6)", func(string) []byte { return []byte(`{"name": `) }, false, 6, "unmarshal"),
		Entry("prevResult that does not parse (6)", func(d string) []byte {
			return conf("1.1.0", d, map[string]any{"prevResult": map[string]any{"cniVersion": "1.1.0", "ips": []map[string]string{{"address": "nope"}}}})
		}, false, 6, "prevResult"),
		Entry("no CNI_NETNS (4)", func(d string) []byte { return conf("1.1.0", d, nil) }, true, 4, "CNI_NETNS"),
		Entry("unsupported version (1)", func(d string) []byte { return conf("9.9.9", d, nil) }, false, 1, "9.9.9"),
		Entry("bad mode (7)", func(d string) []byte { return conf("1.1.0", d, map[string]any{"mode": "vepa"}) }, false, 7, `mode: "vepa"`),
		Entry("missing master (7)", func(d string) []byte { return conf("1.1.0", d, map[string]any{"master": "nope0"}) }, false, 7, `"nope0"`),
	)
})
