package vlan_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/kernelfeature"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/main/vlan"
)

const (
	netName = "vlan-net"
	peerIP  = "10.4.4.1"
)

// conf is the test config: vlan 100 on master0 with host-local handing
// out 10.4.4.10-10.4.4.50 (LinkEnv.Conf merges keys over it).
func conf(ver, dataDir string) map[string]any {
	return map[string]any{
		"cniVersion": ver, "name": netName, "type": "vlan", "master": "master0", "vlanId": 100,
		"ipam": testutil.LinkIPAM(dataDir, "10.4.4"),
		"dns":  map[string]any{"nameservers": []string{"10.4.4.53"}},
	}
}

// wire connects master to peer, which listens on vlan 100 only: peer.100
// holds the peer's address.
func wire(masterNS *ns.NetNS, master string, peerNS *ns.NetNS, peer string) {
	GinkgoHelper()
	Expect(testutil.ConnectNS(
		testutil.VethEnd{NS: masterNS, Name: master},
		testutil.VethEnd{NS: peerNS, Name: peer},
	)).To(Succeed())
	h := testutil.Handle(peerNS)
	p, err := h.LinkByName(peer)
	Expect(err).NotTo(HaveOccurred())
	la := netlink.NewLinkAttrs()
	la.Name, la.ParentIndex = peer+".100", p.Attrs().Index
	Expect(h.LinkAdd(&netlink.Vlan{LinkAttrs: la, VlanId: 100})).To(Succeed())
	v, err := h.LinkByName(peer + ".100")
	Expect(err).NotTo(HaveOccurred())
	addr, err := netlink.ParseAddr(peerIP + "/24")
	Expect(err).NotTo(HaveOccurred())
	Expect(h.AddrAdd(v, addr)).To(Succeed())
	Expect(h.LinkSetUp(v)).To(Succeed())
}

// Every spec here makes 802.1Q links: they run where the kernel has them
// (the VM lane), and skip with the reason elsewhere.
var _ = Describe("vlan", Label(kernelfeature.Label), func() {
	BeforeEach(func() { kernelfeature.Require(kernelfeature.VLAN) })
	e := testutil.NewLinkEnv(testutil.LinkPlugin{
		Plugin: vlan.Plugin, AddSteps: vlan.AddSteps,
		WithStepHook: func(h func(string) error) plugin.Plugin { return vlan.Frame.New(attach.Hooks{AfterStep: h}) },
		Kind:         "vlan", Conf: conf, IPs: 1, Master: "master0", PeerIP: peerIP, Wire: wire, Layer2: true,
		// The kernel keeps one vlan per ID and master.
		SecondKeys: map[string]any{"vlanId": 101},
		BadInput: []testutil.BadInput{
			{Name: "vlanId out of range (7)", Keys: map[string]any{"vlanId": 5000}, Code: 7, Msg: "vlanId: 5000"},
		},
		EditedKeys: map[string]any{"vlanId": 5000, "mtu": 5},
	})

	DescribeTableSubtree("every spec version", func(ver string) {
		It("tags the container's frames with the ID: they reach the peer listening on peer0.100", func() {
			_, res := e.Add(ver, "c1", e.ContNS, e.Conf(ver))
			e.ExpectAttachment(ver, res)
			Expect(res.DNS.Nameservers).To(Equal([]string{"10.4.4.53"}))
			Expect(e.Link(e.ContNS).(*netlink.Vlan).VlanId).To(Equal(100))
		})
		e.VersionSpecs(ver)
	}, testutil.VersionEntries())

	e.Specs()

	It("another VLAN ID does not reach the peer; CHECK tells the IDs apart", func() {
		stdin := e.Conf("1.1.0", map[string]any{"vlanId": 200})
		out, _ := e.Add("1.1.0", "c1", e.ContNS, stdin)
		Expect(testutil.Ping(e.ContNS, peerIP)).NotTo(Succeed())
		e.MustRun(e.Call("CHECK", "c1", e.ContNS, testutil.WithPrev(stdin, out)))
		wrong := e.Run(e.Call("CHECK", "c1", e.ContNS, testutil.WithPrev(e.Conf("1.1.0"), out)))
		Expect(wrong.Err).NotTo(BeNil())
		Expect(wrong.Err.Msg).To(ContainSubstring(`"vlan 200"`))
	})

	// Upstream's vlan takes 0-4094, and an absent vlanId is 0 (priority
	// tagged frames): ADD makes it, CHECK passes, DEL removes it.
	DescribeTable("makes a vlan with ID 0, CHECKs and DELs it",
		func(keys map[string]any) {
			stdin := e.Conf("1.1.0", keys)
			out, _ := e.Add("1.1.0", "c1", e.ContNS, stdin)
			Expect(e.Link(e.ContNS).(*netlink.Vlan).VlanId).To(Equal(0))
			e.MustRun(e.Call("CHECK", "c1", e.ContNS, testutil.WithPrev(stdin, out)))
			e.MustRun(e.Call("DEL", "c1", e.ContNS, stdin))
			Expect(testutil.LinkNames(e.ContNS)).To(ConsistOf("lo"))
		},
		Entry("vlanId 0", map[string]any{"vlanId": 0}),
		Entry("no vlanId", map[string]any{"vlanId": nil}),
	)

	It("refuses a second attachment on the same master and VLAN ID, naming both, and leaves nothing of it", func() {
		e.Add("1.1.0", "c1", e.ContNS, e.Conf("1.1.0"))
		other := testutil.NewNS()
		before := testutil.TakeSnapshot(e.HostNS, other, e.DataDir)
		out := e.Run(e.Call("ADD", "c2", other, e.Conf("1.1.0")))
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Msg).To(And(ContainSubstring("vlanId 100"), ContainSubstring(`master "master0"`)))
		Expect(testutil.TakeSnapshot(e.HostNS, other, e.DataDir)).To(Equal(before))
		Expect(testutil.Ping(e.ContNS, peerIP)).To(Succeed())
	})
})
