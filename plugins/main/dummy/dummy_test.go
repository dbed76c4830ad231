package dummy_test

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
	"github.com/cniforge/plugins/plugins/main/dummy"
)

const netName = "dummy-net"

func conf(ver, dataDir string, keys map[string]any) []byte {
	GinkgoHelper()
	c := map[string]any{
		"cniVersion": ver, "name": netName, "type": "dummy",
		"ipam": map[string]any{"type": "host-local", "dataDir": dataDir, "ranges": [][]map[string]string{
			{{"subnet": "10.2.2.0/24"}}, {{"subnet": "fd00:2::/64"}},
		}, "routes": []map[string]string{{"dst": "10.200.0.0/16"}}},
	}
	for k, v := range keys {
		c[k] = v
	}
	b, err := json.Marshal(c)
	Expect(err).NotTo(HaveOccurred())
	return b
}

// Every spec here makes dummy links: they run where the kernel has them
// (the VM lane), and skip with the reason elsewhere.
var _ = Describe("dummy", Label(kernelfeature.Label), func() {
	var (
		hostNS, contNS *ns.NetNS
		dataDir        string
	)
	BeforeEach(func() {
		kernelfeature.Require(kernelfeature.Dummy)
		hostNS, contNS = testutil.NewNS(), testutil.NewNS()
		dataDir = GinkgoT().TempDir()
	})

	call := func(cmd, id string, n *ns.NetNS, stdin []byte) testutil.Call {
		c := testutil.Call{Command: cmd, ContainerID: id, IfName: "eth0", Stdin: stdin}
		if n != nil {
			c.Netns = n.Path()
		}
		return c
	}
	add := func(ver, id string, n *ns.NetNS, stdin []byte) ([]byte, *current.Result) {
		GinkgoHelper()
		out := testutil.MustRunIn(hostNS, dummy.Plugin, call("ADD", id, n, stdin))
		return out.Stdout, testutil.ParseResult(ver, out.Stdout)
	}
	snapshot := func() testutil.Snapshot {
		GinkgoHelper()
		return testutil.TakeSnapshot(hostNS, contNS, dataDir)
	}

	DescribeTableSubtree("every spec version", func(ver string) {
		It("makes a dummy with the IPAM addresses, reachable from inside the container", func() {
			_, res := add(ver, "c1", contNS, conf(ver, dataDir, nil))
			Expect(res.IPs).To(HaveLen(2))
			if testutil.AtLeast(ver, "0.3.0") {
				Expect(res.Interfaces).To(HaveLen(1))
				Expect(res.Interfaces[0].Name).To(Equal("eth0"))
				Expect(res.Interfaces[0].Sandbox).To(Equal(contNS.Path()))
				Expect(res.Interfaces[0].Mac).NotTo(BeEmpty())
				Expect(*res.IPs[0].Interface).To(Equal(0))
			}
			l, err := testutil.Handle(contNS).LinkByName("eth0")
			Expect(err).NotTo(HaveOccurred())
			Expect(l.Type()).To(Equal("dummy"))
			Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo"))
			Expect(testutil.Addrs(contNS, "eth0")).To(ConsistOf(res.IPs[0].Address.String(), res.IPs[1].Address.String()))
			Expect(testutil.Routes(contNS)).To(ContainElement(HavePrefix("10.200.0.0/16 ")))
			for _, ipc := range res.IPs {
				Expect(testutil.Ping(contNS, ipc.Address.IP.String())).To(Succeed())
			}
		})

		It("survives ADD, CHECK, DEL, DEL and leaves nothing behind", func() {
			stdin := conf(ver, dataDir, nil)
			before := snapshot()
			out, _ := add(ver, "c1", contNS, stdin)
			if testutil.AtLeast(ver, "0.4.0") {
				testutil.MustRunIn(hostNS, dummy.Plugin, call("CHECK", "c1", contNS, testutil.WithPrev(stdin, out)))
			}
			testutil.MustRunIn(hostNS, dummy.Plugin, call("DEL", "c1", contNS, stdin))
			Expect(snapshot()).To(Equal(before))
			testutil.MustRunIn(hostNS, dummy.Plugin, call("DEL", "c1", contNS, stdin))
			Expect(snapshot()).To(Equal(before))
		})

		It("releases the addresses on DEL without a netns and with the netns gone", func() {
			stdin := conf(ver, dataDir, nil)
			gone, remove, err := testutil.CreateNS()
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(remove)
			add(ver, "c1", gone, stdin)
			add(ver, "c2", contNS, stdin)
			path := gone.Path()
			Expect(gone.Close()).To(Succeed())
			Expect(remove()).To(Succeed())
			testutil.MustRunIn(hostNS, dummy.Plugin, testutil.Call{Command: "DEL", ContainerID: "c1", Netns: path, IfName: "eth0", Stdin: stdin})
			testutil.MustRunIn(hostNS, dummy.Plugin, call("DEL", "c2", nil, stdin))
			Expect(testutil.Reservations(dataDir)).To(BeEmpty())
		})
	}, testutil.VersionEntries())

	It("CHECK notices a missing address", func() {
		stdin := conf("1.1.0", dataDir, nil)
		out, res := add("1.1.0", "c1", contNS, stdin)
		h := testutil.Handle(contNS)
		l, err := h.LinkByName("eth0")
		Expect(err).NotTo(HaveOccurred())
		Expect(h.AddrDel(l, &netlink.Addr{IPNet: &res.IPs[0].Address})).To(Succeed())
		chk := testutil.RunIn(hostNS, dummy.Plugin, call("CHECK", "c1", contNS, testutil.WithPrev(stdin, out)))
		Expect(chk.Err).NotTo(BeNil())
		Expect(chk.Err.Msg).To(ContainSubstring(res.IPs[0].Address.IP.String()))
	})

	It("refuses a CNI_IFNAME the container already has and leaves nothing", func() {
		Expect(testutil.Handle(contNS).LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}})).To(Succeed())
		before := snapshot()
		out := testutil.RunIn(hostNS, dummy.Plugin, call("ADD", "c1", contNS, conf("1.1.0", dataDir, nil)))
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Msg).To(ContainSubstring(`"eth0"`))
		Expect(snapshot()).To(Equal(before))
	})

	Describe("a failure injected after each ADD step leaves nothing behind", func() {
		for _, step := range dummy.AddSteps {
			It("error after "+step, func() {
				before := snapshot()
				out := testutil.RunIn(hostNS, dummy.New(attach.Hooks{AfterStep: testutil.FailAfter(step, nil)}), call("ADD", "c1", contNS, conf("1.1.0", dataDir, nil)))
				Expect(out.Err).NotTo(BeNil())
				Expect(out.Err.Msg).To(ContainSubstring("injected failure"))
				Expect(snapshot()).To(Equal(before))
			})
			It("panic after "+step, func() {
				before := snapshot()
				out := testutil.RunIn(hostNS, dummy.New(attach.Hooks{AfterStep: testutil.PanicAfter(step)}), call("ADD", "c1", contNS, conf("1.1.0", dataDir, nil)))
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
		out := testutil.RunIn(hostNS, dummy.Plugin, c)
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Code).To(BeEquivalentTo(code))
		Expect(out.Err.Msg + " " + out.Err.Details).To(ContainSubstring(msg))
		Expect(snapshot()).To(Equal(before))
	},
		Entry("not JSON (6)", func(string) []byte { return []byte(`{"name": `) }, false, 6, "unmarshal"),
		Entry("no CNI_NETNS (4)", func(d string) []byte { return conf("1.1.0", d, nil) }, true, 4, "CNI_NETNS"),
		Entry("unsupported version (1)", func(d string) []byte { return conf("9.9.9", d, nil) }, false, 1, "9.9.9"),
		Entry("no ipam (7)", func(d string) []byte { return conf("1.1.0", d, map[string]any{"ipam": nil}) }, false, 7, "ipam: missing"),
	)
})
