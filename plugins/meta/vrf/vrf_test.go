package vrf_test

import (
	"fmt"
	"net"
	"os/exec"
	"sort"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/kernelfeature"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/meta/vrf"
)

var vrfVersions = []string{"0.3.1", "0.4.0", "1.0.0", "1.1.0"}

// iface is a container interface the spec wires to the host, and what a
// main plugin would have reported for it: addresses, gateways and routes.
type iface struct {
	name, hostName string
	addr4, gw4     string
	addr6, gw6     string
	route4, route6 string // an IPAM route through the gateway
}

var (
	eth0 = iface{name: "eth0", hostName: "h-eth0", addr4: "10.9.0.2/24", gw4: "10.9.0.1", addr6: "fd00:9::2/64", gw6: "fd00:9::1",
		route4: "192.0.2.0/24", route6: "2001:db8:9::/64"}
	net1 = iface{name: "net1", hostName: "h-net1", addr4: "10.10.0.2/24", gw4: "10.10.0.1", addr6: "fd00:10::2/64", gw6: "fd00:10::1",
		route4: "198.51.100.0/24", route6: "2001:db8:10::/64"}
)

func cidr(s string) net.IPNet {
	ipv, n, err := net.ParseCIDR(s)
	Expect(err).NotTo(HaveOccurred())
	n.IP = ipv
	return *n
}

func prevFor(ver string, contNS *ns.NetNS, f iface) []byte {
	GinkgoHelper()
	idx := 1
	res := &current.Result{CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{{Name: f.hostName}, {Name: f.name, Sandbox: contNS.Path()}},
		IPs: []*current.IPConfig{
			{Address: cidr(f.addr4), Gateway: net.ParseIP(f.gw4), Interface: &idx},
			{Address: cidr(f.addr6), Gateway: net.ParseIP(f.gw6), Interface: &idx},
		}}
	_, r4, _ := net.ParseCIDR(f.route4)
	_, r6, _ := net.ParseCIDR(f.route6)
	res.Routes = append(res.Routes, &typesRoute{Dst: *r4, GW: net.ParseIP(f.gw4)}, &typesRoute{Dst: *r6, GW: net.ParseIP(f.gw6)})
	return testutil.PrintResult(res, ver)
}

func conf(ver, keys string, prev []byte) []byte {
	return testutil.JoinConf(fmt.Sprintf(`"cniVersion": %q, "name": "vrf-net", "type": "vrf"`, ver), keys, prev)
}

// routes lists n's routes of every table, as text.
func routes(n *ns.NetNS) []string {
	GinkgoHelper()
	// ip's list retries a dump the kernel interrupted: it is still
	// adding the routes of a device that just came back up.
	rs, err := ip.RouteListFiltered(testutil.Handle(n), netlink.FAMILY_ALL, &netlink.Route{Table: 0}, netlink.RT_FILTER_TABLE)
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, r := range rs {
		// fe80::/64 and ff00::/8 are the kernel's, made again (later) each
		// time a device comes up, as enslaving and releasing make it do.
		if r.Dst != nil && (r.Dst.IP.IsLinkLocalUnicast() || r.Dst.IP.IsMulticast()) {
			continue
		}
		out = append(out, fmt.Sprintf("table %d %s", r.Table, r.String()))
	}
	sort.Strings(out)
	return out
}

func tableRoutes(n *ns.NetNS, table int) []string {
	GinkgoHelper()
	rs, err := ip.RouteListFiltered(testutil.Handle(n), netlink.FAMILY_ALL, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, r := range rs {
		if r.Dst != nil {
			out = append(out, r.Dst.String())
		}
	}
	return out
}

func vrfOf(n *ns.NetNS, name string) *netlink.Vrf {
	GinkgoHelper()
	return testutil.LinkAs[*netlink.Vrf](n, name)
}

func masterOf(n *ns.NetNS, name string) int {
	GinkgoHelper()
	l, err := testutil.Handle(n).LinkByName(name)
	Expect(err).NotTo(HaveOccurred())
	return l.Attrs().MasterIndex
}

// pingFrom pings dst from inside n, bound to device dev when set.
func pingFrom(n *ns.NetNS, dev, dst string) error {
	return n.Do(func() error {
		args := []string{"-c", "1", "-W", "2"}
		if dev != "" {
			args = append(args, "-I", dev)
		}
		out, err := exec.Command("ping", append(args, dst)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ping %v %s: %w\n%s", args, dst, err, out)
		}
		return nil
	})
}

var _ = Describe("vrf", Label(kernelfeature.Label), func() {
	var hostNS, contNS *ns.NetNS

	wire := func(cont *ns.NetNS, f iface) {
		GinkgoHelper()
		g4, g6 := cidr(f.addr4), cidr(f.addr6)
		o4, _ := g4.Mask.Size()
		o6, _ := g6.Mask.Size()
		Expect(testutil.ConnectNS(
			testutil.VethEnd{NS: hostNS, Name: f.hostName, Addrs: []string{fmt.Sprintf("%s/%d", f.gw4, o4), fmt.Sprintf("%s/%d", f.gw6, o6)}},
			testutil.VethEnd{NS: cont, Name: f.name, Addrs: []string{f.addr4, f.addr6}})).To(Succeed())
		h := testutil.Handle(cont)
		l, err := h.LinkByName(f.name)
		Expect(err).NotTo(HaveOccurred())
		_, r4, _ := net.ParseCIDR(f.route4)
		_, r6, _ := net.ParseCIDR(f.route6)
		Expect(h.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: r4, Gw: net.ParseIP(f.gw4)})).To(Succeed())
		Expect(h.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: r6, Gw: net.ParseIP(f.gw6)})).To(Succeed())
	}

	BeforeEach(func() {
		kernelfeature.Require(kernelfeature.VRF)
		hostNS = testutil.NewNS()
		contNS = testutil.NewNS()
		wire(contNS, eth0)
		// A peer beyond the gateway, reached through the IPAM route.
		lo, err := testutil.Handle(hostNS).LinkByName("lo")
		Expect(err).NotTo(HaveOccurred())
		a, err := netlink.ParseAddr("192.0.2.1/32")
		Expect(err).NotTo(HaveOccurred())
		Expect(testutil.Handle(hostNS).AddrAdd(lo, a)).To(Succeed())
	})

	p := testutil.HookedPlugin[attach.Hooks]{New: vrf.New, ContainerID: "ctr1"}

	for _, ver := range vrfVersions {
		It("routes the interface through the VRF table, not main, at "+ver+"; CHECK; DEL twice", func() {
			before := append(testutil.LinkNames(contNS), routes(contNS)...)
			Expect(pingFrom(contNS, "", "192.0.2.1")).To(Succeed()) // through main, before

			out := p.Must(hostNS, "ADD", contNS, "eth0", conf(ver, `"vrfname": "blue"`, prevFor(ver, contNS, eth0)))
			Expect(testutil.ParseResult(ver, out.Stdout).IPs).To(HaveLen(2))
			v := vrfOf(contNS, "blue")
			Expect(masterOf(contNS, "eth0")).To(Equal(v.Index))
			Expect(tableRoutes(contNS, int(v.Table))).To(ContainElements("192.0.2.0/24", "2001:db8:9::/64", "10.9.0.0/24", "fd00:9::/64"))
			Expect(tableRoutes(contNS, 254)).NotTo(ContainElement("192.0.2.0/24"))
			Expect(testutil.Addrs(contNS, "eth0")).To(ContainElements("10.9.0.2/24", "fd00:9::2/64"))
			Expect(pingFrom(contNS, "blue", "192.0.2.1")).To(Succeed())
			Expect(pingFrom(contNS, "", "192.0.2.1")).NotTo(Succeed()) // main has no way there now

			if ver != "0.3.1" {
				p.Must(hostNS, "CHECK", contNS, "eth0", conf(ver, `"vrfname": "blue"`, out.Stdout))
			}
			p.Must(hostNS, "DEL", contNS, "eth0", conf(ver, `"vrfname": "blue"`, nil))
			Expect(testutil.LinkNames(contNS)).NotTo(ContainElement("blue"))
			Expect(masterOf(contNS, "eth0")).To(BeZero())
			p.Must(hostNS, "DEL", contNS, "eth0", conf(ver, `"vrfname": "blue"`, nil))
			_ = before
		})
	}

	It("puts two interfaces into one VRF, and deletes it with the last", func() {
		wire(contNS, net1)
		p.Must(hostNS, "ADD", contNS, "eth0", conf("1.1.0", `"vrfname": "blue", "table": 42`, prevFor("1.1.0", contNS, eth0)))
		out := p.Must(hostNS, "ADD", contNS, "net1", conf("1.1.0", `"vrfname": "blue"`, prevFor("1.1.0", contNS, net1)))
		v := vrfOf(contNS, "blue")
		Expect(v.Table).To(BeEquivalentTo(42))
		Expect(masterOf(contNS, "eth0")).To(Equal(v.Index))
		Expect(masterOf(contNS, "net1")).To(Equal(v.Index))
		Expect(tableRoutes(contNS, 42)).To(ContainElements("192.0.2.0/24", "198.51.100.0/24"))
		p.Must(hostNS, "CHECK", contNS, "net1", conf("1.1.0", `"vrfname": "blue", "table": 42`, out.Stdout))

		p.Must(hostNS, "DEL", contNS, "eth0", conf("1.1.0", `"vrfname": "blue"`, nil))
		Expect(vrfOf(contNS, "blue").Index).To(Equal(v.Index))
		p.Must(hostNS, "DEL", contNS, "net1", conf("1.1.0", `"vrfname": "blue"`, nil))
		Expect(testutil.LinkNames(contNS)).NotTo(ContainElement("blue"))
	})

	It("DEL succeeds when another DEL already took the VRF (upstream #1282), and with the netns gone", func() {
		wire(contNS, net1)
		p.Must(hostNS, "ADD", contNS, "eth0", conf("1.1.0", `"vrfname": "blue"`, prevFor("1.1.0", contNS, eth0)))
		p.Must(hostNS, "ADD", contNS, "net1", conf("1.1.0", `"vrfname": "blue"`, prevFor("1.1.0", contNS, net1)))
		Expect(testutil.Handle(contNS).LinkDel(vrfOf(contNS, "blue"))).To(Succeed())
		p.Must(hostNS, "DEL", contNS, "eth0", conf("1.1.0", `"vrfname": "blue"`, nil))
		p.Must(hostNS, "DEL", contNS, "net1", conf("1.1.0", `"vrfname": "blue"`, nil))

		gone, remove := testutil.NewRemovableNS()
		path := gone.Path()
		remove()
		out := testutil.RunIn(hostNS, vrf.Plugin, testutil.Call{Command: "DEL", ContainerID: "ctr1", IfName: "eth0", Netns: path, Stdin: conf("1.1.0", `"vrfname": "blue"`, nil)})
		Expect(out.Err).To(BeNil())
	})

	It("DEL releases the interface and deletes the VRF with a config that no longer validates", func() {
		// A config edited between ADD and DEL must not keep the attachment
		// from being removed (issue 22).
		p.Must(hostNS, "ADD", contNS, "eth0", conf("1.1.0", `"vrfname": "blue"`, prevFor("1.1.0", contNS, eth0)))
		edited := conf("1.1.0", `"vrfname": "blue", "table": 253`, nil)
		out := p.Run(hostNS, attach.Hooks{}, "ADD", contNS, "eth0", conf("1.1.0", `"vrfname": "blue", "table": 253`, prevFor("1.1.0", contNS, eth0)))
		testutil.ExpectCode(out, 7, "ADD still refuses it")
		p.Must(hostNS, "DEL", contNS, "eth0", edited)
		Expect(testutil.LinkNames(contNS)).NotTo(ContainElement("blue"))
		Expect(masterOf(contNS, "eth0")).To(BeZero())
		p.Must(hostNS, "DEL", contNS, "eth0", edited)
	})

	It("two members' DELs at the same moment both succeed and take the VRF away (upstream #1282)", func() {
		wire(contNS, net1)
		del := vrf.Plugin.SkelFuncs().Del
		for round := 0; round < 5; round++ {
			p.Must(hostNS, "ADD", contNS, "eth0", conf("1.1.0", `"vrfname": "blue"`, prevFor("1.1.0", contNS, eth0)))
			p.Must(hostNS, "ADD", contNS, "net1", conf("1.1.0", `"vrfname": "blue"`, prevFor("1.1.0", contNS, net1)))
			// The DEL callbacks run directly, each on its own thread in the
			// stand-in host: testutil.Run would take turns.
			errs := make(chan error, 2)
			for _, ifName := range []string{"eth0", "net1"} {
				go func() {
					errs <- hostNS.Do(func() error {
						return del(&skel.CmdArgs{ContainerID: "ctr1", Netns: contNS.Path(), IfName: ifName,
							StdinData: conf("1.1.0", `"vrfname": "blue"`, nil)})
					})
				}()
			}
			Expect(<-errs).To(Succeed())
			Expect(<-errs).To(Succeed())
			Expect(testutil.LinkNames(contNS)).NotTo(ContainElement("blue"), "round %d", round)
		}
	})

	It("CHECK fails when the interface left the VRF or a route is missing", func() {
		out := p.Must(hostNS, "ADD", contNS, "eth0", conf("1.1.0", `"vrfname": "blue"`, prevFor("1.1.0", contNS, eth0)))
		v := vrfOf(contNS, "blue")
		_, r4, _ := net.ParseCIDR(eth0.route4)
		Expect(testutil.Handle(contNS).RouteDel(&netlink.Route{Dst: r4, Table: int(v.Table)})).To(Succeed())
		res := p.Run(hostNS, attach.Hooks{}, "CHECK", contNS, "eth0", conf("1.1.0", `"vrfname": "blue"`, out.Stdout))
		Expect(res.Err).NotTo(BeNil())
		Expect(res.Err.Msg).To(ContainSubstring("no route to 192.0.2.0/24"))
		l, err := testutil.Handle(contNS).LinkByName("eth0")
		Expect(err).NotTo(HaveOccurred())
		Expect(testutil.Handle(contNS).LinkSetNoMaster(l)).To(Succeed())
		res = p.Run(hostNS, attach.Hooks{}, "CHECK", contNS, "eth0", conf("1.1.0", `"vrfname": "blue"`, out.Stdout))
		Expect(res.Err).NotTo(BeNil())
		Expect(res.Err.Msg).To(ContainSubstring(`is not in vrf "blue"`))
	})

	It("ADD holds the namespace's lock until its last change is made", func() {
		// At each step another open of the namespace tries the lock without
		// waiting: it must find it taken (another ADD may be creating the
		// same VRF).
		hook, expectHeld := testutil.LockTries(contNS)
		out := p.Run(hostNS, attach.Hooks{AfterStep: hook}, "ADD", contNS, "eth0", conf("1.1.0", `"vrfname": "blue"`, prevFor("1.1.0", contNS, eth0)))
		Expect(out.Err).To(BeNil())
		expectHeld(vrf.AddSteps)
	})

	// A repeated ADD over a live attachment finds the interface in the vrf
	// already: failing after any step, it must not release it (that flushes
	// the live attachment's routes in the vrf's table).
	DescribeTable("a repeated ADD over a live attachment that fails leaves it in the vrf with its routes",
		func(step string) {
			stdin := conf("1.1.0", `"vrfname": "blue"`, prevFor("1.1.0", contNS, eth0))
			p.Must(hostNS, "ADD", contNS, "eth0", stdin)
			v := vrfOf(contNS, "blue")
			live := tableRoutes(contNS, int(v.Table))
			Expect(live).To(ContainElement("192.0.2.0/24"))
			out := p.Run(hostNS, attach.Hooks{AfterStep: testutil.FailAfter(step, nil)}, "ADD", contNS, "eth0", stdin)
			Expect(out.Err).NotTo(BeNil())
			Expect(masterOf(contNS, "eth0")).To(Equal(v.Index))
			Expect(tableRoutes(contNS, int(v.Table))).To(Equal(live))
			Expect(pingFrom(contNS, "blue", "192.0.2.1")).To(Succeed())
		}, testutil.StepEntries(vrf.AddSteps))

	Describe("a failure after each step of ADD leaves nothing", func() {
		DescribeTable("error or panic", func(step string) {
			for _, hook := range []func(string) error{testutil.FailAfter(step, nil), testutil.PanicAfter(step)} {
				before := append(append(testutil.LinkNames(contNS), testutil.AllAddrs(contNS)...), routes(contNS)...)
				out := p.Run(hostNS, attach.Hooks{AfterStep: hook}, "ADD", contNS, "eth0", conf("1.1.0", `"vrfname": "blue"`, prevFor("1.1.0", contNS, eth0)))
				Expect(out.Err).NotTo(BeNil())
				Expect(append(append(testutil.LinkNames(contNS), testutil.AllAddrs(contNS)...), routes(contNS)...)).To(Equal(before))
			}
		}, testutil.StepEntries(vrf.AddSteps))
	})

	DescribeTable("refuses bad input with its code and changes nothing",
		func(code int, stdin func() []byte, msg string) {
			before := testutil.LinkNames(contNS)
			out := p.Run(hostNS, attach.Hooks{}, "ADD", contNS, "eth0", stdin())
			testutil.ExpectCode(out, code)
			Expect(out.Err.Msg + out.Err.Details).To(ContainSubstring(msg))
			Expect(testutil.LinkNames(contNS)).To(Equal(before))
		},
		Entry("not JSON (6)", 6, func() []byte { return []byte("{") }, ""),
		Entry("a version vrf does not speak (1)", 1, func() []byte { return conf("0.3.0", `"vrfname": "blue"`, nil) }, "0.3.0"),
		Entry("no vrfname (7)", 7, func() []byte { return conf("1.1.0", "", prevFor("1.1.0", contNS, eth0)) }, "vrfname: missing"),
		Entry("no prevResult (7)", 7, func() []byte { return conf("1.1.0", `"vrfname": "blue"`, nil) }, "prevResult: missing"),
	)

	It("refuses an interface that already has a master, leaving it there", func() {
		h := testutil.Handle(contNS)
		Expect(h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br-other"}})).To(Succeed())
		br, err := h.LinkByName("br-other")
		Expect(err).NotTo(HaveOccurred())
		l, err := h.LinkByName("eth0")
		Expect(err).NotTo(HaveOccurred())
		Expect(h.LinkSetMaster(l, br)).To(Succeed())
		out := p.Run(hostNS, attach.Hooks{}, "ADD", contNS, "eth0", conf("1.1.0", `"vrfname": "blue"`, prevFor("1.1.0", contNS, eth0)))
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Msg).To(ContainSubstring(`"eth0"`), "names the interface")
		Expect(out.Err.Msg).To(ContainSubstring("already has a master"))
		Expect(masterOf(contNS, "eth0")).To(Equal(br.Attrs().Index))
		Expect(testutil.LinkNames(contNS)).NotTo(ContainElement("blue"))
	})

	It("refuses an existing VRF with another table (7)", func() {
		p.Must(hostNS, "ADD", contNS, "eth0", conf("1.1.0", `"vrfname": "blue", "table": 42`, prevFor("1.1.0", contNS, eth0)))
		wire(contNS, net1)
		out := p.Run(hostNS, attach.Hooks{}, "ADD", contNS, "net1", conf("1.1.0", `"vrfname": "blue", "table": 43`, prevFor("1.1.0", contNS, net1)))
		testutil.ExpectCode(out, 7)
		Expect(out.Err.Msg).To(ContainSubstring(`vrf "blue" exists with table 42, not 43`))
		Expect(masterOf(contNS, "net1")).To(BeZero())
	})
})
