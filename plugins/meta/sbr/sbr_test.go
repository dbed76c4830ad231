package sbr_test

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
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
	return testutil.PrintResult(res, ver)
}

func conf(ver, keys string, prev []byte) []byte {
	return testutil.JoinConf(fmt.Sprintf(`"cniVersion": %q, "name": "sbr-net", "type": "sbr"`, ver), keys, prev)
}

// routeGet is the route a packet from src to dst takes in n, as the
// kernel answers RTM_GETROUTE (`ip route get <dst> from <src>`), rendered
// "via <gw> dev <link> table <table>".
func routeGet(n *ns.NetNS, dst, src string) string {
	GinkgoHelper()
	h := testutil.Handle(n)
	routes, err := h.RouteGetWithOptions(net.ParseIP(dst), &netlink.RouteGetOptions{SrcAddr: net.ParseIP(src)})
	Expect(err).NotTo(HaveOccurred(), "route get %s from %s", dst, src)
	Expect(routes).To(HaveLen(1))
	r := routes[0]
	out := ""
	if r.Gw != nil {
		out = "via " + r.Gw.String() + " "
	}
	return out + fmt.Sprintf("dev %s table %d", linkName(h, r.LinkIndex), r.Table)
}

func linkName(h *netlink.Handle, index int) string {
	GinkgoHelper()
	l, err := h.LinkByIndex(index)
	Expect(err).NotTo(HaveOccurred())
	return l.Attrs().Name
}

// routeString renders r as "<dst> [via <gw>] dev <link> [src <src>]
// table <t> proto <p> scope <s> type <t> metric <m>", a destination of
// nil or /0 as "default".
func routeString(h *netlink.Handle, r netlink.Route) string {
	GinkgoHelper()
	s := "default"
	if !ip.IsDefault(r.Dst) {
		s = r.Dst.String()
	}
	if r.Gw != nil {
		s += " via " + r.Gw.String()
	}
	if r.LinkIndex != 0 {
		s += " dev " + linkName(h, r.LinkIndex)
	}
	if r.Src != nil {
		s += " src " + r.Src.String()
	}
	return s + fmt.Sprintf(" table %d proto %d scope %d type %d metric %d", r.Table, r.Protocol, r.Scope, r.Type, r.Priority)
}

// routes lists the routes of family in n matching filter (with mask) as
// routeString renders them.
func routes(n *ns.NetNS, family int, filter *netlink.Route, mask uint64) []string {
	GinkgoHelper()
	h := testutil.Handle(n)
	list, err := ip.RouteListFiltered(h, family, filter, mask)
	Expect(err).NotTo(HaveOccurred())
	out := []string{}
	for _, r := range list {
		out = append(out, routeString(h, r))
	}
	return out
}

// tableRoutes lists the IPv4 routes of table in n.
func tableRoutes(n *ns.NetNS, table int) []string {
	GinkgoHelper()
	return routes(n, netlink.FAMILY_V4, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
}

// allRoutes lists the routes of family in every table of n.
func allRoutes(n *ns.NetNS, family int) []string {
	GinkgoHelper()
	return routes(n, family, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
}

func mustLink(n *ns.NetNS, name string) netlink.Link {
	GinkgoHelper()
	l, err := testutil.Handle(n).LinkByName(name)
	Expect(err).NotTo(HaveOccurred())
	return l
}

// addRoute adds a route to dst ("default" or a prefix) via gw on dev in
// table (0: main) with metric.
func addRoute(n *ns.NetNS, dst, gw, dev string, table, metric int) {
	GinkgoHelper()
	r := &netlink.Route{Gw: net.ParseIP(gw), LinkIndex: mustLink(n, dev).Attrs().Index, Table: table, Priority: metric}
	if dst != "default" {
		_, r.Dst, _ = net.ParseCIDR(dst)
	}
	Expect(testutil.Handle(n).RouteAdd(r)).To(Succeed())
}

// delDefault deletes the IPv4 default route of table.
func delDefault(n *ns.NetNS, table int) {
	GinkgoHelper()
	Expect(testutil.Handle(n).RouteDel(&netlink.Route{Dst: &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}, Table: table})).To(Succeed())
}

func addAddr(n *ns.NetNS, dev, addr string) {
	GinkgoHelper()
	a, err := netlink.ParseAddr(addr)
	Expect(err).NotTo(HaveOccurred())
	Expect(testutil.Handle(n).AddrAdd(mustLink(n, dev), a)).To(Succeed())
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
		addRoute(contNS, "default", "10.5.0.1", "eth0", 0, 0)
		addRoute(contNS, "default", "fd00:6::1", "net1", 0, 2000)
		// The kernel adds each device's fe80::/64 and ff00::/8 routes a
		// moment after the link comes up: wait for them, so that a snapshot
		// taken now does not miss what sbr will move and put back.
		Eventually(func() []string { return allRoutes(contNS, netlink.FAMILY_V6) }).WithTimeout(10 * time.Second).Should(ContainElements(
			HavePrefix("fe80::/64 dev eth0 "), HavePrefix("fe80::/64 dev net1 "),
			HavePrefix("ff00::/8 dev eth0 "), HavePrefix("ff00::/8 dev net1 ")))
	})

	p := testutil.HookedPlugin[attach.Hooks]{New: sbr.New, ContainerID: "ctr1"}
	// state is the rules and every IPv4 route but the local table's: sbr
	// never touches that one, and the kernel fills it in its own time.
	state := func() []string {
		var out []string
		for _, r := range allRoutes(contNS, netlink.FAMILY_V4) {
			if !strings.Contains(r, fmt.Sprintf(" table %d ", unix.RT_TABLE_LOCAL)) {
				out = append(out, r)
			}
		}
		return append(testutil.IPRules(contNS), out...)
	}

	DescribeTableSubtree("every spec version", func(ver string) {
		It("sends each address's packets through its own table, CHECKs, and DEL removes it all, twice", func() {
			rulesBefore := testutil.IPRules(contNS)
			Expect(routeGet(contNS, "192.0.2.9", "10.6.0.2")).To(ContainSubstring("via 10.5.0.1 dev eth0"))

			out := p.Must(hostNS, "ADD", contNS, "net1", conf(ver, "", prevFor(ver, contNS, net1)))
			Expect(testutil.ParseResult(ver, out.Stdout).IPs).To(HaveLen(2)) // passed through
			out0 := p.Must(hostNS, "ADD", contNS, "eth0", conf(ver, "", prevFor(ver, contNS, eth0)))
			Expect(out0.Err).To(BeNil())

			Expect(routeGet(contNS, "192.0.2.9", "10.6.0.2")).To(ContainSubstring("via 10.6.0.1 dev net1 table 100"))
			Expect(routeGet(contNS, "2001:db8::9", "fd00:6::2")).To(ContainSubstring("via fd00:6::1 dev net1 table 100"))
			Expect(routeGet(contNS, "192.0.2.9", "10.5.0.2")).To(ContainSubstring("via 10.5.0.1 dev eth0 table 101"))
			Expect(routeGet(contNS, "10.6.0.7", "10.6.0.2")).To(ContainSubstring("dev net1 table 100"))
			Expect(routes(contNS, netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_MAIN, LinkIndex: mustLink(contNS, "net1").Attrs().Index},
				netlink.RT_FILTER_TABLE|netlink.RT_FILTER_OIF)).To(BeEmpty()) // moved out of main

			if testutil.AtLeast(ver, "0.4.0") {
				p.Must(hostNS, "CHECK", contNS, "net1", conf(ver, "", out.Stdout))
				p.Must(hostNS, "CHECK", contNS, "eth0", conf(ver, "", out0.Stdout))
			}
			p.Must(hostNS, "DEL", contNS, "net1", conf(ver, "", nil))
			p.Must(hostNS, "DEL", contNS, "eth0", conf(ver, "", nil))
			Expect(testutil.IPRules(contNS)).To(Equal(rulesBefore))
			Expect(tableRoutes(contNS, 100)).To(BeEmpty())
			Expect(tableRoutes(contNS, 101)).To(BeEmpty())
			p.Must(hostNS, "DEL", contNS, "net1", conf(ver, "", nil))
		})
	}, testutil.VersionEntries())

	It("DEL removes the rules and empties the table with a config that no longer validates", func() {
		// A config edited between ADD and DEL must not keep the attachment
		// from being removed (issue 22).
		rulesBefore := testutil.IPRules(contNS)
		prev := prevFor("1.1.0", contNS, net1)
		p.Must(hostNS, "ADD", contNS, "net1", conf("1.1.0", "", prev))
		edited := conf("1.1.0", `"gateways": ["nope", "10.6.0.254", "10.6.0.253"]`, prev)
		out := p.Run(hostNS, attach.Hooks{}, "ADD", contNS, "net1", edited)
		testutil.ExpectCode(out, types.ErrInvalidNetworkConfig, "ADD still refuses it")
		p.Must(hostNS, "DEL", contNS, "net1", edited)
		Expect(testutil.IPRules(contNS)).To(Equal(rulesBefore))
		left, err := testutil.Handle(contNS).RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: 100}, netlink.RT_FILTER_TABLE)
		Expect(err).NotTo(HaveOccurred())
		Expect(left).To(BeEmpty())
		p.Must(hostNS, "DEL", contNS, "net1", edited)
	})

	It("with table adds only the rules, into that table, and leaves the routes alone", func() {
		before := allRoutes(contNS, netlink.FAMILY_V4)
		addRoute(contNS, "default", "10.6.0.1", "net1", 300, 0)
		p.Must(hostNS, "ADD", contNS, "net1", conf("1.1.0", `"table": 300`, prevFor("1.1.0", contNS, net1)))
		Expect(routeGet(contNS, "192.0.2.9", "10.6.0.2")).To(ContainSubstring("via 10.6.0.1 dev net1 table 300"))
		Expect(routeGet(contNS, "192.0.2.9", "10.5.0.2")).To(ContainSubstring("via 10.5.0.1 dev eth0"))
		Expect(testutil.IPRules(contNS)).To(ContainElement(ContainSubstring("10.6.0.2/32")))
		p.Must(hostNS, "CHECK", contNS, "net1", conf("1.1.0", `"table": 300`, prevFor("1.1.0", contNS, net1)))
		p.Must(hostNS, "DEL", contNS, "net1", conf("1.1.0", `"table": 300`, nil))
		Expect(testutil.IPRules(contNS)).NotTo(ContainElement(ContainSubstring("10.6.0.2")))
		delDefault(contNS, 300)
		Expect(allRoutes(contNS, netlink.FAMILY_V4)).To(Equal(before))
	})

	It("with table, DEL removes only the rules into that table", func() {
		// Another rule from the same address, into another table (an
		// admin's, or another sbr attachment's), is not this one's.
		h := testutil.Handle(contNS)
		other := netlink.NewRule()
		other.Src = &net.IPNet{IP: net.ParseIP("10.6.0.2").To4(), Mask: net.CIDRMask(32, 32)}
		other.Table, other.Priority, other.Family = 400, 500, netlink.FAMILY_V4
		Expect(h.RuleAdd(other)).To(Succeed())
		p.Must(hostNS, "ADD", contNS, "net1", conf("1.1.0", `"table": 300`, prevFor("1.1.0", contNS, net1)))
		Expect(testutil.IPRules(contNS)).To(ContainElements(
			ContainSubstring("10.6.0.2/32 to all table 300"), ContainSubstring("10.6.0.2/32 to all table 400")))
		p.Must(hostNS, "DEL", contNS, "net1", conf("1.1.0", `"table": 300`, nil))
		rules := testutil.IPRules(contNS)
		Expect(rules).NotTo(ContainElement(ContainSubstring("table 300")))
		Expect(rules).To(ContainElement(ContainSubstring("10.6.0.2/32 to all table 400")))
	})

	It("uses static gateways and adds source hints", func() {
		addAddr(contNS, "net1", "10.6.0.3/24") // the gateway to use
		addAddr(hostNS, "h-net1", "10.6.0.254/24")
		p.Must(hostNS, "ADD", contNS, "net1", conf("1.1.0", `"gateways": ["10.6.0.254"], "addSourceHints": true`, prevFor("1.1.0", contNS, net1)))
		Expect(routeGet(contNS, "192.0.2.9", "10.6.0.2")).To(ContainSubstring("via 10.6.0.254 dev net1 table 100"))
		Expect(tableRoutes(contNS, 100)).To(ContainElement(HavePrefix("10.6.0.0/24 dev net1 src 10.6.0.2 table 100 ")))
		p.Must(hostNS, "CHECK", contNS, "net1", conf("1.1.0", `"gateways": ["10.6.0.254"], "addSourceHints": true`, prevFor("1.1.0", contNS, net1)))
	})

	It("CHECK fails when a rule or a route is missing", func() {
		prev := prevFor("1.1.0", contNS, net1)
		p.Must(hostNS, "ADD", contNS, "net1", conf("1.1.0", "", prev))
		delDefault(contNS, 100)
		out := p.Run(hostNS, attach.Hooks{}, "CHECK", contNS, "net1", conf("1.1.0", "", prev))
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Msg).To(ContainSubstring("no default route via 10.6.0.1"))
		rule := netlink.NewRule()
		rule.Src, rule.Table, rule.Family = &net.IPNet{IP: net.ParseIP("10.6.0.2").To4(), Mask: net.CIDRMask(32, 32)}, 100, netlink.FAMILY_V4
		Expect(testutil.Handle(contNS).RuleDel(rule)).To(Succeed())
		out = p.Run(hostNS, attach.Hooks{}, "CHECK", contNS, "net1", conf("1.1.0", "", prev))
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Msg).To(ContainSubstring("no rule from 10.6.0.2/32"))
	})

	It("ADD waits for the namespace's lock before it picks a table or adds a rule", func() {
		// Another command in the namespace (an sbr ADD of another
		// interface, a DEL) holds the lock: it may be picking the same free
		// table. The lock is a flock on the namespace file, so any open of
		// the same namespace contends for it.
		before := state()
		held, err := ns.Open(contNS.Path())
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(held.Close)
		unlock, err := held.Lock()
		Expect(err).NotTo(HaveOccurred())
		var once sync.Once
		release := func() { once.Do(unlock) }

		done := make(chan testutil.Output, 1)
		finished := make(chan struct{})
		c := testutil.NewCall("ADD", "ctr1", "net1", contNS, conf("1.1.0", "", prevFor("1.1.0", contNS, net1)))
		go func() {
			defer close(finished)
			defer GinkgoRecover()
			var out testutil.Output
			Expect(hostNS.Do(func() (err error) {
				out, err = testutil.Run(sbr.Plugin, c)
				return err
			})).To(Succeed())
			done <- out
		}()
		// Should the spec fail while ADD waits, let it finish before the
		// namespaces go.
		DeferCleanup(func() {
			release()
			Eventually(finished).WithTimeout(time.Minute).Should(BeClosed())
		})

		Consistently(func(g Gomega) {
			g.Expect(done).NotTo(Receive(), "ADD returned while the lock was held")
			g.Expect(state()).To(Equal(before), "ADD changed the namespace while the lock was held")
		}).WithTimeout(2 * time.Second).ProbeEvery(50 * time.Millisecond).Should(Succeed())

		release()
		var out testutil.Output
		Eventually(done).WithTimeout(time.Minute).Should(Receive(&out))
		Expect(out.Err).To(BeNil())
		Expect(testutil.IPRules(contNS)).To(ContainElement(ContainSubstring("10.6.0.2/32 to all table 100")))
	})

	It("ADD holds the namespace's lock until its last change is made", func() {
		// At each step another open of the namespace tries the lock without
		// waiting: it must find it taken.
		hook, expectHeld := testutil.LockTries(contNS)
		out := p.Run(hostNS, attach.Hooks{AfterStep: hook}, "ADD", contNS, "net1", conf("1.1.0", `"addSourceHints": true`, prevFor("1.1.0", contNS, net1)))
		Expect(out.Err).To(BeNil())
		expectHeld(sbr.AddSteps)
	})

	It("DEL succeeds with the netns gone, and with the interface gone removes the rules prevResult names", func() {
		gone, remove := testutil.NewRemovableNS()
		wire(gone, iface{name: "net1", hostName: "h-gone", addrs: []string{"10.7.0.2/24"}, gws: []string{"10.7.0.1"}})
		prevGone := prevFor("1.1.0", gone, iface{name: "net1", hostName: "h-gone", addrs: []string{"10.7.0.2/24"}, gws: []string{"10.7.0.1"}})
		p.Must(hostNS, "ADD", gone, "net1", conf("1.1.0", "", prevGone))
		path := gone.Path()
		remove()
		out := testutil.RunIn(hostNS, sbr.Plugin, testutil.Call{Command: "DEL", ContainerID: "ctr1", IfName: "net1", Netns: path, Stdin: conf("1.1.0", "", nil)})
		Expect(out.Err).To(BeNil())

		prev := prevFor("1.1.0", contNS, net1)
		p.Must(hostNS, "ADD", contNS, "net1", conf("1.1.0", "", prev))
		Expect(testutil.Handle(contNS).LinkDel(mustLink(contNS, "net1"))).To(Succeed())
		p.Must(hostNS, "DEL", contNS, "net1", conf("1.1.0", "", prev))
		Expect(testutil.IPRules(contNS)).NotTo(ContainElement(ContainSubstring("10.6.0.2")))
		Expect(testutil.IPRules(contNS)).NotTo(ContainElement(ContainSubstring("fd00:6::2")))
	})

	Describe("a failure after each step of ADD leaves nothing", func() {
		DescribeTable("error or panic", func(step string) {
			for _, hook := range []func(string) error{testutil.FailAfter(step, nil), testutil.PanicAfter(step)} {
				before := state()
				out := p.Run(hostNS, attach.Hooks{AfterStep: hook}, "ADD", contNS, "net1", conf("1.1.0", `"addSourceHints": true`, prevFor("1.1.0", contNS, net1)))
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
			testutil.ExpectCode(out, code)
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
