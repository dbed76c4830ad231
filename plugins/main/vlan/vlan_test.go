package vlan_test

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
	"github.com/cniforge/plugins/plugins/main/vlan"
)

const (
	netName = "vlan-net"
	peerIP  = "10.4.4.1"
)

// conf is the test config: keys merged over vlan 100 on master0 with
// host-local handing out 10.4.4.10-10.4.4.50 (a nil value drops the key).
func conf(ver, dataDir string, keys map[string]any) []byte {
	GinkgoHelper()
	c := map[string]any{
		"cniVersion": ver, "name": netName, "type": "vlan", "master": "master0", "vlanId": 100,
		"ipam": map[string]any{"type": "host-local", "dataDir": dataDir, "ranges": [][]map[string]string{{{
			"subnet": "10.4.4.0/24", "rangeStart": "10.4.4.10", "rangeEnd": "10.4.4.50", "gateway": peerIP,
		}}}, "routes": []map[string]string{{"dst": "10.200.0.0/16"}}},
		"dns": map[string]any{"nameservers": []string{"10.4.4.53"}},
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

// Every spec here makes 802.1Q links: they run where the kernel has them
// (the VM lane), and skip with the reason elsewhere.
var _ = Describe("vlan", Label(kernelfeature.Label), func() {
	var (
		hostNS, contNS, peerNS *ns.NetNS
		dataDir                string
	)
	BeforeEach(func() {
		kernelfeature.Require(kernelfeature.VLAN)
		hostNS, contNS, peerNS = testutil.NewNS(), testutil.NewNS(), testutil.NewNS()
		dataDir = GinkgoT().TempDir()
		// master0 is wired to peer0 in a peer namespace, which listens on
		// vlan 100 only: peer0.100 holds the peer's address.
		Expect(testutil.ConnectNS(
			testutil.VethEnd{NS: hostNS, Name: "master0"},
			testutil.VethEnd{NS: peerNS, Name: "peer0"},
		)).To(Succeed())
		h := testutil.Handle(peerNS)
		p, err := h.LinkByName("peer0")
		Expect(err).NotTo(HaveOccurred())
		la := netlink.NewLinkAttrs()
		la.Name, la.ParentIndex = "peer0.100", p.Attrs().Index
		Expect(h.LinkAdd(&netlink.Vlan{LinkAttrs: la, VlanId: 100})).To(Succeed())
		v, err := h.LinkByName("peer0.100")
		Expect(err).NotTo(HaveOccurred())
		addr, err := netlink.ParseAddr(peerIP + "/24")
		Expect(err).NotTo(HaveOccurred())
		Expect(h.AddrAdd(v, addr)).To(Succeed())
		Expect(h.LinkSetUp(v)).To(Succeed())
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
		return testutil.RunIn(hostNS, vlan.Plugin, c)
	}
	add := func(ver, id string, n *ns.NetNS, stdin []byte) ([]byte, *current.Result) {
		GinkgoHelper()
		out := testutil.MustRunIn(hostNS, vlan.Plugin, call("ADD", id, n, stdin))
		return out.Stdout, testutil.ParseResult(ver, out.Stdout)
	}
	snapshot := func() testutil.Snapshot {
		GinkgoHelper()
		return testutil.TakeSnapshot(hostNS, contNS, dataDir)
	}

	DescribeTableSubtree("every spec version", func(ver string) {
		It("tags the container's frames with the ID: they reach the peer listening on peer0.100", func() {
			_, res := add(ver, "c1", contNS, conf(ver, dataDir, nil))
			Expect(res.IPs).To(HaveLen(1))
			Expect(res.DNS.Nameservers).To(Equal([]string{"10.4.4.53"}))
			if testutil.AtLeast(ver, "0.3.0") {
				Expect(res.Interfaces).To(HaveLen(1))
				Expect(res.Interfaces[0].Name).To(Equal("eth0"))
				Expect(res.Interfaces[0].Sandbox).To(Equal(contNS.Path()))
				Expect(res.Interfaces[0].Mac).NotTo(BeEmpty())
				Expect(*res.IPs[0].Interface).To(Equal(0))
			}
			l, err := testutil.Handle(contNS).LinkByName("eth0")
			Expect(err).NotTo(HaveOccurred())
			Expect(l.Type()).To(Equal("vlan"))
			Expect(l.(*netlink.Vlan).VlanId).To(Equal(100))
			Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo", "master0"))
			Expect(testutil.Ping(contNS, peerIP)).To(Succeed())
		})

		It("survives ADD, CHECK, DEL, DEL and leaves nothing behind", func() {
			stdin := conf(ver, dataDir, nil)
			before := snapshot()
			out, _ := add(ver, "c1", contNS, stdin)
			if testutil.AtLeast(ver, "0.4.0") {
				testutil.MustRunIn(hostNS, vlan.Plugin, call("CHECK", "c1", contNS, testutil.WithPrev(stdin, out)))
			}
			testutil.MustRunIn(hostNS, vlan.Plugin, call("DEL", "c1", contNS, stdin))
			Expect(snapshot()).To(Equal(before))
			testutil.MustRunIn(hostNS, vlan.Plugin, call("DEL", "c1", contNS, stdin))
			Expect(snapshot()).To(Equal(before))
		})

		It("releases the address on DEL without a netns and with the netns gone", func() {
			stdin := conf(ver, dataDir, nil)
			gone, remove, err := testutil.CreateNS()
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(remove)
			add(ver, "c1", gone, stdin)
			path := gone.Path()
			Expect(gone.Close()).To(Succeed())
			Expect(remove()).To(Succeed())
			testutil.MustRunIn(hostNS, vlan.Plugin, testutil.Call{Command: "DEL", ContainerID: "c1", Netns: path, IfName: "eth0", Stdin: stdin})
			testutil.MustRunIn(hostNS, vlan.Plugin, call("DEL", "c1", nil, stdin))
			Expect(testutil.Reservations(dataDir)).To(BeEmpty())
			Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo", "master0"))
		})
	}, testutil.VersionEntries())

	It("another VLAN ID does not reach the peer; CHECK tells the IDs apart", func() {
		stdin := conf("1.1.0", dataDir, map[string]any{"vlanId": 200})
		out, _ := add("1.1.0", "c1", contNS, stdin)
		Expect(testutil.Ping(contNS, peerIP)).NotTo(Succeed())
		testutil.MustRunIn(hostNS, vlan.Plugin, call("CHECK", "c1", contNS, testutil.WithPrev(stdin, out)))
		wrong := run(call("CHECK", "c1", contNS, testutil.WithPrev(conf("1.1.0", dataDir, nil), out)))
		Expect(wrong.Err).NotTo(BeNil())
		Expect(wrong.Err.Msg).To(ContainSubstring(`"vlan 200"`))
	})

	It("refuses a second attachment on the same master and VLAN ID, naming both, and leaves nothing of it", func() {
		add("1.1.0", "c1", contNS, conf("1.1.0", dataDir, nil))
		other := testutil.NewNS()
		before := testutil.TakeSnapshot(hostNS, other, dataDir)
		out := run(call("ADD", "c2", other, conf("1.1.0", dataDir, nil)))
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Msg).To(And(ContainSubstring("vlanId 100"), ContainSubstring(`master "master0"`)))
		Expect(testutil.TakeSnapshot(hostNS, other, dataDir)).To(Equal(before))
		Expect(testutil.Ping(contNS, peerIP)).To(Succeed())
	})

	It("linkInContainer: the master lives in the container", func() {
		outside := testutil.NewNS()
		Expect(testutil.ConnectNS(
			testutil.VethEnd{NS: contNS, Name: "cmaster"},
			testutil.VethEnd{NS: outside, Name: "opeer"},
		)).To(Succeed())
		h := testutil.Handle(outside)
		p, err := h.LinkByName("opeer")
		Expect(err).NotTo(HaveOccurred())
		la := netlink.NewLinkAttrs()
		la.Name, la.ParentIndex = "opeer.100", p.Attrs().Index
		Expect(h.LinkAdd(&netlink.Vlan{LinkAttrs: la, VlanId: 100})).To(Succeed())
		v, err := h.LinkByName("opeer.100")
		Expect(err).NotTo(HaveOccurred())
		addr, err := netlink.ParseAddr(peerIP + "/24")
		Expect(err).NotTo(HaveOccurred())
		Expect(h.AddrAdd(v, addr)).To(Succeed())
		Expect(h.LinkSetUp(v)).To(Succeed())

		stdin := conf("1.1.0", dataDir, map[string]any{"master": "cmaster", "linkInContainer": true})
		out, _ := add("1.1.0", "c1", contNS, stdin)
		Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo", "cmaster", "eth0"))
		Expect(testutil.Ping(contNS, peerIP)).To(Succeed())
		testutil.MustRunIn(hostNS, vlan.Plugin, call("CHECK", "c1", contNS, testutil.WithPrev(stdin, out)))
		testutil.MustRunIn(hostNS, vlan.Plugin, call("DEL", "c1", contNS, stdin))
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

	It("is layer 2 only without ipam", func() {
		_, res := add("1.1.0", "c1", contNS, conf("1.1.0", dataDir, map[string]any{"ipam": nil}))
		Expect(res.IPs).To(BeEmpty())
		Expect(testutil.Addrs(contNS, "eth0")).To(BeEmpty())
	})

	Describe("a failure injected after each ADD step leaves nothing behind", func() {
		for _, step := range vlan.AddSteps {
			It("error after "+step, func() {
				before := snapshot()
				out := testutil.RunIn(hostNS, vlan.New(attach.Hooks{AfterStep: testutil.FailAfter(step, nil)}), call("ADD", "c1", contNS, conf("1.1.0", dataDir, nil)))
				Expect(out.Err).NotTo(BeNil())
				Expect(out.Err.Msg).To(ContainSubstring("injected failure"))
				Expect(snapshot()).To(Equal(before))
				// The vlan ID is free again: the same ADD succeeds.
				add("1.1.0", "c1", contNS, conf("1.1.0", dataDir, nil))
			})
			It("panic after "+step, func() {
				before := snapshot()
				out := testutil.RunIn(hostNS, vlan.New(attach.Hooks{AfterStep: testutil.PanicAfter(step)}), call("ADD", "c1", contNS, conf("1.1.0", dataDir, nil)))
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
		Entry("no CNI_NETNS (4)", func(d string) []byte { return conf("1.1.0", d, nil) }, true, 4, "CNI_NETNS"),
		Entry("unsupported version (1)", func(d string) []byte { return conf("9.9.9", d, nil) }, false, 1, "9.9.9"),
		Entry("vlanId out of range (7)", func(d string) []byte { return conf("1.1.0", d, map[string]any{"vlanId": 5000}) }, false, 7, "vlanId: 5000"),
		Entry("missing master (7)", func(d string) []byte { return conf("1.1.0", d, map[string]any{"master": "nope0"}) }, false, 7, `"nope0"`),
	)
})
