package dummy_test

import (
	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/kernelfeature"
	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/main/dummy"
)

const netName = "dummy-net"

// conf is the test config: host-local handing out one IPv4 and one IPv6
// address (LinkEnv.Conf merges keys over it).
func conf(ver, dataDir string) map[string]any {
	return map[string]any{
		"cniVersion": ver, "name": netName, "type": "dummy",
		"ipam": map[string]any{"type": "host-local", "dataDir": dataDir, "ranges": [][]map[string]string{
			{{"subnet": "10.2.2.0/24"}}, {{"subnet": "fd00:2::/64"}},
		}, "routes": []map[string]string{{"dst": "10.200.0.0/16"}}},
	}
}

// Every spec here makes dummy links: they run where the kernel has them
// (the VM lane), and skip with the reason elsewhere.
var _ = Describe("dummy", Label(kernelfeature.Label), func() {
	BeforeEach(func() { kernelfeature.Require(kernelfeature.Dummy) })
	e := testutil.NewLinkEnv(testutil.LinkPlugin{
		Plugin: dummy.Plugin, AddSteps: dummy.AddSteps,
		WithStepHook: func(h func(string) error) plugin.Plugin { return dummy.Frame.New(attach.Hooks{AfterStep: h}) },
		Kind:         "dummy", Conf: conf, IPs: 2,
		BadInput: []testutil.BadInput{
			{Name: "no ipam (7)", Keys: map[string]any{"ipam": nil}, Code: 7, Msg: "ipam: missing"},
		},
	})

	DescribeTableSubtree("every spec version", func(ver string) {
		It("makes a dummy with the IPAM addresses, reachable from inside the container", func() {
			_, res := e.Add(ver, "c1", e.ContNS, e.Conf(ver))
			e.ExpectAttachment(ver, res)
			Expect(testutil.Routes(e.ContNS)).To(ContainElement(HavePrefix("10.200.0.0/16 ")))
		})
		e.VersionSpecs(ver)
	}, testutil.VersionEntries())

	e.Specs()

	It("DEL removes the link with a config edited to drop ipam, and the reservation with the config of its ADD", func() {
		// The only key dummy validates is ipam: a config edited between ADD
		// and DEL without it must not keep the link (issue 22).
		stdin := e.Conf("1.1.0")
		e.Add("1.1.0", "c1", e.ContNS, stdin)
		reserved := testutil.Reservations(e.DataDir)
		Expect(reserved).NotTo(BeEmpty())
		edited := e.Conf("1.1.0", map[string]any{"ipam": nil})
		out := e.Run(e.Call("ADD", "c2", e.ContNS, edited))
		testutil.ExpectCode(out, types.ErrInvalidNetworkConfig, "ADD still refuses it")
		e.MustRun(e.Call("DEL", "c1", e.ContNS, edited))
		_, err := testutil.Handle(e.ContNS).LinkByName("eth0")
		Expect(err).To(MatchError(ContainSubstring("not found")), "the dummy is gone")
		Expect(testutil.Reservations(e.DataDir)).To(Equal(reserved), "no ipam named: nothing released")
		e.MustRun(e.Call("DEL", "c1", e.ContNS, edited))
		e.MustRun(e.Call("DEL", "c1", e.ContNS, stdin))
		Expect(testutil.Reservations(e.DataDir)).To(BeEmpty())
	})

	It("CHECK notices a missing address", func() {
		stdin := e.Conf("1.1.0")
		out, res := e.Add("1.1.0", "c1", e.ContNS, stdin)
		Expect(testutil.Handle(e.ContNS).AddrDel(e.Link(e.ContNS), &netlink.Addr{IPNet: &res.IPs[0].Address})).To(Succeed())
		chk := e.Run(e.Call("CHECK", "c1", e.ContNS, testutil.WithPrev(stdin, out)))
		Expect(chk.Err).NotTo(BeNil())
		Expect(chk.Err.Msg).To(ContainSubstring(res.IPs[0].Address.IP.String()))
	})
})
