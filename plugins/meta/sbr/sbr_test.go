package sbr_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/meta/sbr"
)

// iface is a container interface the test wires up and the result a main
// plugin would have reported for it.
type iface struct {
	name, hostName string
	addrs, gws     []string
}

var (
	eth0 = iface{name: "eth0", hostName: "h-eth0", addrs: []string{"10.5.0.2/24"}, gws: []string{"10.5.0.1"}}
	net1 = iface{name: "net1", hostName: "h-net1", addrs: []string{"10.6.0.2/24", "fd00:6::2/64"}, gws: []string{"10.6.0.1", "fd00:6::1"}}
)

func prevFor(ver string, contNS *ns.NetNS, f iface) []byte {
	GinkgoHelper()
	res := &current.Result{CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{{Name: f.hostName}, {Name: f.name, Sandbox: contNS.Path()}}}
	idx := 1
	for i, a := range f.addrs {
		ipv, n, err := net.ParseCIDR(a)
		Expect(err).NotTo(HaveOccurred())
		n.IP = ipv
		res.IPs = append(res.IPs, &current.IPConfig{Address: *n, Gateway: net.ParseIP(f.gws[i]), Interface: &idx})
	}
	r, err := res.GetAsVersion(ver)
	Expect(err).NotTo(HaveOccurred())
	b, err := json.Marshal(r)
	Expect(err).NotTo(HaveOccurred())
	return b
}

func conf(ver, keys string, prev []byte) []byte {
	s := fmt.Sprintf(`{"cniVersion": %q, "name": "sbr-net", "type": "sbr"`, ver)
	if keys != "" {
		s += ", " + keys
	}
	if prev != nil {
		s += `, "prevResult": ` + string(prev)
	}
	return []byte(s + "}")
}

// routeGet is `ip route get <dst> from <src>` in n: the route a packet
// from src takes, with its table.
func routeGet(n *ns.NetNS, dst, src string) string {
	GinkgoHelper()
	args := []string{"-n", filepath.Base(n.Path())}
	if strings.Contains(dst, ":") {
		args = append(args, "-6")
	}
	args = append(args, "route", "get", dst, "from", src)
	out, err := exec.Command("ip", args...).CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "%s", out)
	return strings.Join(strings.Fields(string(out)), " ")
}

func ipOut(n *ns.NetNS, args ...string) string {
	GinkgoHelper()
	out, err := exec.Command("ip", append([]string{"-n", filepath.Base(n.Path())}, args...)...).CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "%s", out)
	return string(out)
}

var _ = Describe("sbr", func() {
	var hostNS, contNS *ns.NetNS

	wire := func(cont *ns.NetNS, f iface) {
		GinkgoHelper()
		var hostAddrs []string
		for i, a := range f.addrs {
			_, n, _ := net.ParseCIDR(a)
			ones, _ := n.Mask.Size()
			hostAddrs = append(hostAddrs, fmt.Sprintf("%s/%d", f.gws[i], ones))
		}
		Expect(testutil.ConnectNS(testutil.VethEnd{NS: hostNS, Name: f.hostName, Addrs: hostAddrs},
			testutil.VethEnd{NS: cont, Name: f.name, Addrs: f.addrs})).To(Succeed())
	}

	BeforeEach(func() {
		hostNS = testutil.NewNS()
		contNS = testutil.NewNS()
		wire(contNS, eth0)
		wire(contNS, net1)
		// The container's default route is through eth0, as a main plugin
		// would leave it; net1's answers would go out there without sbr.
		ipOut(contNS, "route", "add", "default", "via", "10.5.0.1", "dev", "eth0")
		ipOut(contNS, "-6", "route", "add", "default", "via", "fd00:6::1", "dev", "net1", "metric", "2000")
		// The kernel adds each device's fe80::/64 and ff00::/8 routes a
		// moment after the link comes up: wait for them, so that a snapshot
		// taken now does not miss what sbr will move and put back.
		Eventually(func() string { return ipOut(contNS, "-6", "route", "show", "table", "all") }).WithTimeout(10 * time.Second).Should(And(
			ContainSubstring("fe80::/64 dev eth0"), ContainSubstring("fe80::/64 dev net1"),
			ContainSubstring("ff00::/8 dev eth0"), ContainSubstring("ff00::/8 dev net1")))
	})

	run := func(hooks attach.Hooks, cmd string, n *ns.NetNS, ifName string, stdin []byte) testutil.Output {
		GinkgoHelper()
		c := testutil.Call{Command: cmd, ContainerID: "ctr1", IfName: ifName, Stdin: stdin}
		if n != nil {
			c.Netns = n.Path()
		}
		return testutil.RunIn(hostNS, sbr.New(hooks), c)
	}
	must := func(cmd string, n *ns.NetNS, ifName string, stdin []byte) testutil.Output {
		GinkgoHelper()
		out := run(attach.Hooks{}, cmd, n, ifName, stdin)
		Expect(out.Err).To(BeNil(), "%s: %v", cmd, out.Err)
		return out
	}
	// state is the rules and every route but the local table's: sbr never
	// touches that one, and the kernel fills it in its own time (an IPv6
	// address's local route once its DAD work ran, link-local addresses
	// after DAD).
	state := func() []string {
		var routes []string
		for _, l := range strings.Split(ipOut(contNS, "route", "show", "table", "all"), "\n") {
			if !strings.Contains(l, "table local") {
				routes = append(routes, l)
			}
		}
		return append(testutil.IPRules(contNS), routes...)
	}

	DescribeTableSubtree("every spec version", func(ver string) {
		It("sends each address's packets through its own table, CHECKs, and DEL removes it all, twice", func() {
			rulesBefore := testutil.IPRules(contNS)
			Expect(routeGet(contNS, "192.0.2.9", "10.6.0.2")).To(ContainSubstring("via 10.5.0.1 dev eth0"))

			out := must("ADD", contNS, "net1", conf(ver, "", prevFor(ver, contNS, net1)))
			Expect(testutil.ParseResult(ver, out.Stdout).IPs).To(HaveLen(2)) // passed through
			out0 := must("ADD", contNS, "eth0", conf(ver, "", prevFor(ver, contNS, eth0)))
			Expect(out0.Err).To(BeNil())

			Expect(routeGet(contNS, "192.0.2.9", "10.6.0.2")).To(ContainSubstring("via 10.6.0.1 dev net1 table 100"))
			Expect(routeGet(contNS, "2001:db8::9", "fd00:6::2")).To(ContainSubstring("via fd00:6::1 dev net1 table 100"))
			Expect(routeGet(contNS, "192.0.2.9", "10.5.0.2")).To(ContainSubstring("via 10.5.0.1 dev eth0 table 101"))
			Expect(routeGet(contNS, "10.6.0.7", "10.6.0.2")).To(ContainSubstring("dev net1 table 100"))
			Expect(ipOut(contNS, "route", "show", "dev", "net1")).To(BeEmpty()) // moved out of main

			if testutil.AtLeast(ver, "0.4.0") {
				must("CHECK", contNS, "net1", conf(ver, "", out.Stdout))
				must("CHECK", contNS, "eth0", conf(ver, "", out0.Stdout))
			}
			must("DEL", contNS, "net1", conf(ver, "", nil))
			must("DEL", contNS, "eth0", conf(ver, "", nil))
			Expect(testutil.IPRules(contNS)).To(Equal(rulesBefore))
			Expect(ipOut(contNS, "route", "show", "table", "100")).To(BeEmpty())
			Expect(ipOut(contNS, "route", "show", "table", "101")).To(BeEmpty())
			must("DEL", contNS, "net1", conf(ver, "", nil))
		})
	}, testutil.VersionEntries())

	It("DEL removes the rules and empties the table with a config that no longer validates", func() {
		// A config edited between ADD and DEL must not keep the attachment
		// from being removed (issue 22).
		rulesBefore := testutil.IPRules(contNS)
		prev := prevFor("1.1.0", contNS, net1)
		must("ADD", contNS, "net1", conf("1.1.0", "", prev))
		edited := conf("1.1.0", `"gateways": ["nope", "10.6.0.254", "10.6.0.253"]`, prev)
		out := run(attach.Hooks{}, "ADD", contNS, "net1", edited)
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Code).To(BeEquivalentTo(types.ErrInvalidNetworkConfig), "ADD still refuses it")
		must("DEL", contNS, "net1", edited)
		Expect(testutil.IPRules(contNS)).To(Equal(rulesBefore))
		left, err := testutil.Handle(contNS).RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: 100}, netlink.RT_FILTER_TABLE)
		Expect(err).NotTo(HaveOccurred())
		Expect(left).To(BeEmpty())
		must("DEL", contNS, "net1", edited)
	})

	It("with table adds only the rules, into that table, and leaves the routes alone", func() {
		routes := ipOut(contNS, "route", "show", "table", "all")
		ipOut(contNS, "route", "add", "default", "via", "10.6.0.1", "dev", "net1", "table", "300")
		must("ADD", contNS, "net1", conf("1.1.0", `"table": 300`, prevFor("1.1.0", contNS, net1)))
		Expect(routeGet(contNS, "192.0.2.9", "10.6.0.2")).To(ContainSubstring("via 10.6.0.1 dev net1 table 300"))
		Expect(routeGet(contNS, "192.0.2.9", "10.5.0.2")).To(ContainSubstring("via 10.5.0.1 dev eth0"))
		Expect(testutil.IPRules(contNS)).To(ContainElement(ContainSubstring("10.6.0.2/32")))
		must("CHECK", contNS, "net1", conf("1.1.0", `"table": 300`, prevFor("1.1.0", contNS, net1)))
		must("DEL", contNS, "net1", conf("1.1.0", `"table": 300`, nil))
		Expect(testutil.IPRules(contNS)).NotTo(ContainElement(ContainSubstring("10.6.0.2")))
		ipOut(contNS, "route", "del", "default", "table", "300")
		Expect(ipOut(contNS, "route", "show", "table", "all")).To(Equal(routes))
	})

	It("uses static gateways and adds source hints", func() {
		ipOut(contNS, "addr", "add", "10.6.0.3/24", "dev", "net1") // the gateway to use
		ipOut(hostNS, "addr", "add", "10.6.0.254/24", "dev", "h-net1")
		must("ADD", contNS, "net1", conf("1.1.0", `"gateways": ["10.6.0.254"], "addSourceHints": true`, prevFor("1.1.0", contNS, net1)))
		Expect(routeGet(contNS, "192.0.2.9", "10.6.0.2")).To(ContainSubstring("via 10.6.0.254 dev net1 table 100"))
		Expect(ipOut(contNS, "route", "show", "table", "100")).To(ContainSubstring("10.6.0.0/24 dev net1 proto kernel scope link src 10.6.0.2"))
		must("CHECK", contNS, "net1", conf("1.1.0", `"gateways": ["10.6.0.254"], "addSourceHints": true`, prevFor("1.1.0", contNS, net1)))
	})

	It("CHECK fails when a rule or a route is missing", func() {
		prev := prevFor("1.1.0", contNS, net1)
		must("ADD", contNS, "net1", conf("1.1.0", "", prev))
		ipOut(contNS, "route", "del", "default", "table", "100")
		out := run(attach.Hooks{}, "CHECK", contNS, "net1", conf("1.1.0", "", prev))
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Msg).To(ContainSubstring("no default route via 10.6.0.1"))
		ipOut(contNS, "rule", "del", "from", "10.6.0.2", "table", "100")
		out = run(attach.Hooks{}, "CHECK", contNS, "net1", conf("1.1.0", "", prev))
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Msg).To(ContainSubstring("no rule from 10.6.0.2/32"))
	})

	It("DEL succeeds with the netns gone, and with the interface gone removes the rules prevResult names", func() {
		gone, remove, err := testutil.CreateNS()
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = remove() }) // best effort: removed below
		wire(gone, iface{name: "net1", hostName: "h-gone", addrs: []string{"10.7.0.2/24"}, gws: []string{"10.7.0.1"}})
		prevGone := prevFor("1.1.0", gone, iface{name: "net1", hostName: "h-gone", addrs: []string{"10.7.0.2/24"}, gws: []string{"10.7.0.1"}})
		must("ADD", gone, "net1", conf("1.1.0", "", prevGone))
		path := gone.Path()
		Expect(remove()).To(Succeed())
		out := testutil.RunIn(hostNS, sbr.Plugin, testutil.Call{Command: "DEL", ContainerID: "ctr1", IfName: "net1", Netns: path, Stdin: conf("1.1.0", "", nil)})
		Expect(out.Err).To(BeNil())

		prev := prevFor("1.1.0", contNS, net1)
		must("ADD", contNS, "net1", conf("1.1.0", "", prev))
		ipOut(contNS, "link", "del", "net1")
		must("DEL", contNS, "net1", conf("1.1.0", "", prev))
		Expect(testutil.IPRules(contNS)).NotTo(ContainElement(ContainSubstring("10.6.0.2")))
		Expect(testutil.IPRules(contNS)).NotTo(ContainElement(ContainSubstring("fd00:6::2")))
	})

	Describe("a failure after each step of ADD leaves nothing", func() {
		DescribeTable("error or panic", func(step string) {
			for _, hook := range []func(string) error{testutil.FailAfter(step, nil), testutil.PanicAfter(step)} {
				before := state()
				out := run(attach.Hooks{AfterStep: hook}, "ADD", contNS, "net1", conf("1.1.0", `"addSourceHints": true`, prevFor("1.1.0", contNS, net1)))
				Expect(out.Err).NotTo(BeNil())
				Expect(state()).To(Equal(before))
			}
		}, testutil.StepEntries(sbr.AddSteps))
	})

	DescribeTable("refuses bad input with its code and changes nothing",
		func(code int, mutate func(c *testutil.Call), msg string) {
			before := state()
			c := testutil.Call{Command: "ADD", ContainerID: "ctr1", IfName: "net1", Netns: contNS.Path(),
				Stdin: conf("1.1.0", "", prevFor("1.1.0", contNS, net1))}
			mutate(&c)
			out := testutil.RunIn(hostNS, sbr.Plugin, c)
			Expect(out.Err).NotTo(BeNil())
			Expect(out.Err.Code).To(BeEquivalentTo(code))
			Expect(out.Err.Msg + out.Err.Details).To(ContainSubstring(msg))
			Expect(state()).To(Equal(before))
		},
		Entry("not JSON (6)", 6, func(c *testutil.Call) { c.Stdin = []byte("{") }, ""),
		Entry("prevResult not decodable (6)", 6, func(c *testutil.Call) { c.Stdin = conf("1.1.0", "", []byte(`{"cniVersion": "1.1.0", "ips": 7}`)) }, "prevResult"),
		Entry("CNI_NETNS missing (4)", 4, func(c *testutil.Call) { c.Netns = "" }, "CNI_NETNS"),
		Entry("incompatible version (1)", 1, func(c *testutil.Call) { c.Stdin = conf("9.0.0", "", nil) }, ""),
		Entry("no prevResult (7)", 7, func(c *testutil.Call) { c.Stdin = conf("1.1.0", "", nil) }, "prevResult: missing"),
		Entry("no address for the interface (7)", 7, func(c *testutil.Call) { c.IfName = "eth0" }, `no address for interface "eth0"`),
		Entry("bad table (7)", 7, func(c *testutil.Call) { c.Stdin = conf("1.1.0", `"table": 255`, prevFor("1.1.0", contNS, net1)) }, "table: 255"),
		Entry("not a netns (8)", 8, func(c *testutil.Call) { c.Netns = "/proc/self/status" }, "/proc/self/status"),
	)

	It("answers GC and STATUS", func() {
		for _, cmd := range []string{"GC", "STATUS"} {
			out := testutil.RunIn(hostNS, sbr.Plugin, testutil.Call{Command: cmd, Stdin: conf("1.1.0", `"cni.dev/valid-attachments": []`, nil)})
			Expect(out.Err).To(BeNil(), cmd)
		}
	})
	_ = types.ErrInternal
})
