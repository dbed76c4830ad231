package macvlan_test

import (
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/main/macvlan"
)

const (
	netName = "macvlan-net"
	peerIP  = "10.1.1.1"
)

// conf is the test network config: a macvlan on master0 with host-local
// handing out 10.1.1.10-10.1.1.50 (LinkEnv.Conf merges keys over it).
func conf(ver, dataDir string) map[string]any {
	return map[string]any{
		"cniVersion": ver, "name": netName, "type": "macvlan", "master": "master0",
		"ipam": testutil.LinkIPAM(dataDir, "10.1.1"),
		"dns":  map[string]any{"nameservers": []string{"10.1.1.53"}},
	}
}

var _ = Describe("macvlan", func() {
	// master0 in the stand-in host is wired to peer0 (10.1.1.1) in a peer
	// namespace: the master's wire.
	e := testutil.NewLinkEnv(testutil.LinkPlugin{
		Plugin: macvlan.Plugin, AddSteps: macvlan.AddSteps,
		WithStepHook: func(h func(string) error) plugin.Plugin { return macvlan.Frame.New(attach.Hooks{AfterStep: h}) },
		Kind:         "macvlan", Conf: conf, IPs: 1, Master: "master0", PeerIP: peerIP, Layer2: true,
		BadInput: []testutil.BadInput{
			{Name: "bad CNI_ARGS (4)", Args: "MAC=nope", Code: 4, Msg: "CNI_ARGS MAC"},
			{Name: "bad mode (7)", Keys: map[string]any{"mode": "l3"}, Code: 7, Msg: `mode: "l3"`},
			{Name: "ipam type not in CNI_PATH (7)", Keys: map[string]any{"ipam": map[string]any{"type": "no-such-ipam"}}, Code: 7, Msg: "no-such-ipam"},
		},
		EditedKeys: map[string]any{"mode": "evil", "mtu": 5, "mac": "nope"},
	})
	macOf := func(n *ns.NetNS) string {
		GinkgoHelper()
		return e.Link(n).Attrs().HardwareAddr.String()
	}

	DescribeTableSubtree("every spec version", func(ver string) {
		It("puts a macvlan on the master in the container and reaches the master's peer", func() {
			_, res := e.Add(ver, "c1", e.ContNS, e.Conf(ver))
			e.ExpectAttachment(ver, res)
			Expect(res.IPs[0].Address.String()).To(MatchRegexp(`^10\.1\.1\.\d+/24$`))
			Expect(res.Routes).To(HaveLen(1))
			Expect(res.DNS.Nameservers).To(Equal([]string{"10.1.1.53"}))
			Expect(e.Link(e.ContNS).(*netlink.Macvlan).Mode).To(Equal(netlink.MACVLAN_MODE_BRIDGE))
			Expect(testutil.Routes(e.ContNS)).To(ContainElement("10.200.0.0/16 via " + peerIP + " dev eth0"))
			Expect(e.ContNS.Do(func() error {
				v, err := sysctl("net/ipv4/conf/eth0/arp_notify")
				if err == nil && v != "1" {
					err = errorf("arp_notify is %q", v)
				}
				return err
			})).To(Succeed())
		})
		e.VersionSpecs(ver)
	}, testutil.VersionEntries())

	e.Specs()

	Describe("modes", func() {
		It("bridge: two containers on one master reach each other and the peer", func() {
			other := testutil.NewNS()
			_, a := e.Add("1.1.0", "a", e.ContNS, e.Conf("1.1.0"))
			_, b := e.Add("1.1.0", "b", other, e.Conf("1.1.0"))
			Expect(testutil.Ping(e.ContNS, b.IPs[0].Address.IP.String())).To(Succeed())
			Expect(testutil.Ping(other, a.IPs[0].Address.IP.String())).To(Succeed())
			Expect(testutil.Ping(other, peerIP)).To(Succeed())
		})

		It("private: container-to-container traffic is dropped, the peer is reached", func() {
			other := testutil.NewNS()
			keys := map[string]any{"mode": "private"}
			e.Add("1.1.0", "a", e.ContNS, e.Conf("1.1.0", keys))
			_, b := e.Add("1.1.0", "b", other, e.Conf("1.1.0", keys))
			Expect(testutil.Ping(e.ContNS, peerIP)).To(Succeed())
			Expect(testutil.Ping(other, peerIP)).To(Succeed())
			Expect(testutil.Ping(e.ContNS, b.IPs[0].Address.IP.String())).NotTo(Succeed())
		})

		It("passthru: the one macvlan of the master reaches the peer; CHECK sees the mode", func() {
			stdin := e.Conf("1.1.0", map[string]any{"mode": "passthru"})
			out, _ := e.Add("1.1.0", "a", e.ContNS, stdin)
			Expect(e.Link(e.ContNS).(*netlink.Macvlan).Mode).To(Equal(netlink.MACVLAN_MODE_PASSTHRU))
			Expect(testutil.Ping(e.ContNS, peerIP)).To(Succeed())
			e.MustRun(e.Call("CHECK", "a", e.ContNS, testutil.WithPrev(stdin, out)))
			// The same result, checked against a config in bridge mode.
			wrong := e.Run(e.Call("CHECK", "a", e.ContNS, testutil.WithPrev(e.Conf("1.1.0"), out)))
			Expect(wrong.Err).NotTo(BeNil())
			Expect(wrong.Err.Msg).To(ContainSubstring(`mode "passthru"`))
		})

		It("vepa with bcqueuelen sets both", func() {
			e.Add("1.1.0", "a", e.ContNS, e.Conf("1.1.0", map[string]any{"mode": "vepa", "bcqueuelen": 123}))
			l := e.Link(e.ContNS).(*netlink.Macvlan)
			Expect(l.Mode).To(Equal(netlink.MACVLAN_MODE_VEPA))
			Expect(l.BCQueueLen).To(BeEquivalentTo(123))
			Expect(testutil.Ping(e.ContNS, peerIP)).To(Succeed())
		})
	})

	It("CHECK fails when the address ADD put on the container interface is gone", func() {
		// No routes in the result: the kernel drops a route through the
		// gateway with the address, and CHECK must notice the address
		// itself, not only the route that went with it.
		ipam := map[string]any{"type": "host-local", "dataDir": e.DataDir, "ranges": [][]map[string]string{
			{{"subnet": "10.1.1.0/24", "rangeStart": "10.1.1.10", "rangeEnd": "10.1.1.50"}},
		}}
		stdin := e.Conf("1.1.0", map[string]any{"ipam": ipam})
		out, res := e.Add("1.1.0", "c1", e.ContNS, stdin)
		Expect(res.Routes).To(BeEmpty())
		check := e.Call("CHECK", "c1", e.ContNS, testutil.WithPrev(stdin, out))
		e.MustRun(check)
		Expect(testutil.Handle(e.ContNS).AddrDel(e.Link(e.ContNS), &netlink.Addr{IPNet: &res.IPs[0].Address})).To(Succeed())
		bad := e.Run(check)
		Expect(bad.Err).NotTo(BeNil(), "CHECK passed without the address")
		Expect(bad.Err.Msg).To(ContainSubstring("lacks address " + res.IPs[0].Address.String()))
	})

	It("takes the default route's interface when master is not set, and says to set it without one", func() {
		stdin := e.Conf("1.1.0", map[string]any{"master": nil})
		out := e.Run(e.Call("ADD", "c1", e.ContNS, stdin))
		testutil.ExpectCode(out, types.ErrInvalidNetworkConfig)
		Expect(out.Err.Msg).To(ContainSubstring(`set "master"`))

		h := testutil.Handle(e.HostNS)
		m, err := h.LinkByName("master0")
		Expect(err).NotTo(HaveOccurred())
		Expect(h.AddrAdd(m, mustAddr("10.1.1.2/24"))).To(Succeed())
		Expect(h.RouteAdd(&netlink.Route{Gw: parseIP(peerIP)})).To(Succeed())
		e.Add("1.1.0", "c1", e.ContNS, stdin)
		Expect(testutil.Ping(e.ContNS, peerIP)).To(Succeed())
	})

	It("dual stack: sets arp_notify and ndisc_notify, and the IPv6 address is usable at once (no DAD wait)", func() {
		h := testutil.Handle(e.PeerNS)
		p, err := h.LinkByName("peer0")
		Expect(err).NotTo(HaveOccurred())
		Expect(h.AddrAdd(p, &netlink.Addr{IPNet: mustAddr("fd00:1::1/64").IPNet, Flags: 0x02 /* IFA_F_NODAD */})).To(Succeed())
		ipam := map[string]any{"type": "host-local", "dataDir": e.DataDir, "ranges": [][]map[string]string{
			{{"subnet": "10.1.1.0/24", "rangeStart": "10.1.1.10", "rangeEnd": "10.1.1.50"}},
			{{"subnet": "fd00:1::/64", "rangeStart": "fd00:1::10", "rangeEnd": "fd00:1::50"}},
		}}
		_, res := e.Add("1.1.0", "c1", e.ContNS, e.Conf("1.1.0", map[string]any{"ipam": ipam}))
		Expect(res.IPs).To(HaveLen(2))
		Expect(e.ContNS.Do(func() error {
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
		addrs, err := testutil.Handle(e.ContNS).AddrList(nil, netlink.FAMILY_V6)
		Expect(err).NotTo(HaveOccurred())
		found := false
		for _, a := range addrs {
			if a.IP.Equal(res.IPs[1].Address.IP) {
				found = true
				Expect(a.Flags & 0x40 /* IFA_F_TENTATIVE */).To(BeZero())
			}
		}
		Expect(found).To(BeTrue())
		Expect(testutil.Ping(e.ContNS, "fd00:1::1")).To(Succeed())
	})

	DescribeTable("takes the MAC from each source", func(keys map[string]any, cniArgs, want string) {
		stdin := e.Conf("1.1.0", keys)
		c := e.Call("ADD", "c1", e.ContNS, stdin)
		c.Args = cniArgs
		out := e.MustRun(c)
		res := testutil.ParseResult("1.1.0", out.Stdout)
		Expect(res.Interfaces[0].Mac).To(Equal(want))
		Expect(macOf(e.ContNS)).To(Equal(want))
		Expect(testutil.Ping(e.ContNS, peerIP)).To(Succeed())
		e.MustRun(e.Call("CHECK", "c1", e.ContNS, testutil.WithPrev(stdin, out.Stdout)))
	},
		Entry("runtimeConfig.mac", map[string]any{"runtimeConfig": map[string]any{"mac": "02:00:00:00:00:01"}, "mac": "02:00:00:00:00:04"}, "MAC=02:00:00:00:00:03", "02:00:00:00:00:01"),
		Entry("args.cni.mac", map[string]any{"args": map[string]any{"cni": map[string]any{"mac": "02:00:00:00:00:02"}}, "mac": "02:00:00:00:00:04"}, "MAC=02:00:00:00:00:03", "02:00:00:00:00:02"),
		Entry("CNI_ARGS MAC", map[string]any{"mac": "02:00:00:00:00:04"}, "IgnoreUnknown=1;MAC=02:00:00:00:00:03", "02:00:00:00:00:03"),
		Entry("mac", map[string]any{"mac": "02:00:00:00:00:04"}, "", "02:00:00:00:00:04"),
	)

	It("runs GC and STATUS with only CNI_COMMAND and CNI_PATH, forwarding them to IPAM", func() {
		_, res := e.Add("1.1.0", "c1", e.ContNS, e.Conf("1.1.0"))
		Expect(testutil.Reservations(e.DataDir)).To(HaveLen(1))
		e.MustRun(testutil.Call{Command: "STATUS", Stdin: e.Conf("1.1.0")})
		gc := e.Conf("1.1.0", map[string]any{"cni.dev/valid-attachments": []map[string]string{}})
		e.MustRun(testutil.Call{Command: "GC", Stdin: gc})
		Expect(testutil.Reservations(e.DataDir)).To(BeEmpty(), "GC released %s", res.IPs[0].Address.IP)
	})
})

func sysctl(name string) (string, error) {
	b, err := readFile("/proc/sys/" + name)
	return strings.TrimSpace(string(b)), err
}
