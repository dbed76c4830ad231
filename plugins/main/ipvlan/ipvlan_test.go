package ipvlan_test

import (
	"encoding/json"

	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/kernelfeature"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/main/ipvlan"
)

const (
	netName = "ipvlan-net"
	peerIP  = "10.3.3.1"
)

// conf is the test config: an ipvlan on master0 with host-local handing
// out 10.3.3.10-10.3.3.50 (LinkEnv.Conf merges keys over it).
func conf(ver, dataDir string) map[string]any {
	return map[string]any{
		"cniVersion": ver, "name": netName, "type": "ipvlan", "master": "master0",
		"ipam": testutil.LinkIPAM(dataDir, "10.3.3"),
	}
}

// Every spec here makes ipvlan links: they run where the kernel has them
// (the VM lane), and skip with the reason elsewhere.
var _ = Describe("ipvlan", Label(kernelfeature.Label), func() {
	BeforeEach(func() { kernelfeature.Require(kernelfeature.IPVlan) })
	e := testutil.NewLinkEnv(testutil.LinkPlugin{
		Plugin: ipvlan.Plugin, AddSteps: ipvlan.AddSteps,
		WithStepHook: func(h func(string) error) plugin.Plugin { return ipvlan.Frame.New(attach.Hooks{AfterStep: h}) },
		Kind:         "ipvlan", Conf: conf, IPs: 1, Master: "master0", PeerIP: peerIP, Layer2: true,
		BadInput: []testutil.BadInput{
			{Name: "prevResult that does not parse (6)", Keys: map[string]any{
				"prevResult": map[string]any{"cniVersion": "1.1.0", "ips": []map[string]string{{"address": "nope"}}},
			}, Code: 6, Msg: "prevResult"},
			{Name: "bad mode (7)", Keys: map[string]any{"mode": "vepa"}, Code: 7, Msg: `mode: "vepa"`},
		},
		EditedKeys: map[string]any{"mode": "evil", "mtu": 5},
	})
	mode := func(n *ns.NetNS) netlink.IPVlanMode {
		GinkgoHelper()
		l := e.Link(n)
		Expect(l.Type()).To(Equal("ipvlan"))
		return l.(*netlink.IPVlan).Mode
	}

	DescribeTableSubtree("every spec version", func(ver string) {
		It("puts an l2 ipvlan on the master in the container and reaches the master's peer", func() {
			_, res := e.Add(ver, "c1", e.ContNS, e.Conf(ver))
			e.ExpectAttachment(ver, res)
			Expect(mode(e.ContNS)).To(Equal(netlink.IPVLAN_MODE_L2))
		})
		e.VersionSpecs(ver)
	}, testutil.VersionEntries())

	e.Specs()

	DescribeTable("two containers on one master reach each other", func(m string, want netlink.IPVlanMode, peerToo bool) {
		other := testutil.NewNS()
		stdin := e.Conf("1.1.0", map[string]any{"mode": m})
		outA, a := e.Add("1.1.0", "a", e.ContNS, stdin)
		_, b := e.Add("1.1.0", "b", other, stdin)
		Expect(mode(e.ContNS)).To(Equal(want))
		Expect(testutil.Ping(e.ContNS, b.IPs[0].Address.IP.String())).To(Succeed())
		Expect(testutil.Ping(other, a.IPs[0].Address.IP.String())).To(Succeed())
		if peerToo {
			Expect(testutil.Ping(other, peerIP)).To(Succeed())
		}
		e.MustRun(e.Call("CHECK", "a", e.ContNS, testutil.WithPrev(stdin, outA)))
		// The same result, checked against a config in another mode.
		otherMode := "l2"
		if m == "l2" {
			otherMode = "l3"
		}
		wrong := e.Run(e.Call("CHECK", "a", e.ContNS, testutil.WithPrev(e.Conf("1.1.0", map[string]any{"mode": otherMode}), outA)))
		Expect(wrong.Err).NotTo(BeNil())
		Expect(wrong.Err.Msg).To(ContainSubstring(`mode "` + m + `"`))
	},
		Entry("l2", "l2", netlink.IPVLAN_MODE_L2, true),
		Entry("l3", "l3", netlink.IPVLAN_MODE_L3, false),
		Entry("l3s", "l3s", netlink.IPVLAN_MODE_L3S, false),
	)

	It("chained: takes the master and the addresses from prevResult", func() {
		prev := `{"cniVersion": "1.1.0", "interfaces": [{"name": "master0"}], "ips": [{"address": "10.3.3.77/24", "interface": 0}]}`
		stdin := e.Conf("1.1.0", map[string]any{"master": nil, "ipam": nil, "prevResult": json.RawMessage(prev)})
		_, res := e.Add("1.1.0", "c1", e.ContNS, stdin)
		Expect(res.IPs).To(HaveLen(1))
		Expect(res.IPs[0].Address.String()).To(Equal("10.3.3.77/24"))
		Expect(*res.IPs[0].Interface).To(Equal(0))
		Expect(res.Interfaces).To(HaveLen(1))
		Expect(res.Interfaces[0].Name).To(Equal("eth0"))
		Expect(testutil.Addrs(e.ContNS, "eth0")).To(ConsistOf("10.3.3.77/24"))
		Expect(testutil.Ping(e.ContNS, peerIP)).To(Succeed())
		Expect(testutil.Reservations(e.DataDir)).To(BeEmpty())

		// prevResult with two interfaces names no master.
		two := `{"cniVersion": "1.1.0", "interfaces": [{"name": "a"}, {"name": "b"}], "ips": []}`
		out := e.Run(e.Call("ADD", "c2", testutil.NewNS(), e.Conf("1.1.0", map[string]any{"master": nil, "ipam": nil, "prevResult": json.RawMessage(two)})))
		testutil.ExpectCode(out, types.ErrInvalidNetworkConfig)
		Expect(out.Err.Msg).To(ContainSubstring("2 interfaces"))
	})
})
