package tap_test

import (
	"net"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/main/tap"
)

var _ = Describe("tap", func() {
	env := testutil.UseAttachEnv(tap.Plugin, "tap0")

	// bridgeIn makes bridge br0 in n, up.
	bridgeIn := func(n *ns.NetNS) *netlink.Bridge {
		GinkgoHelper()
		h := testutil.Handle(n)
		la := netlink.NewLinkAttrs()
		la.Name = "br0"
		br := &netlink.Bridge{LinkAttrs: la}
		Expect(h.LinkAdd(br)).To(Succeed())
		Expect(h.LinkSetUp(br)).To(Succeed())
		l, err := h.LinkByName("br0")
		Expect(err).NotTo(HaveOccurred())
		return l.(*netlink.Bridge)
	}
	// bridgeWithPeer makes br0 in env.ContNS (bridgeIn) with a neighbour on it:
	// veth nb0 (its port) to eth0, 10.1.3.1/24, in a peer namespace.
	bridgeWithPeer := func() (*netlink.Bridge, *ns.NetNS) {
		GinkgoHelper()
		br := bridgeIn(env.ContNS)
		peerNS := testutil.NewNS()
		Expect(testutil.ConnectNS(testutil.VethEnd{NS: env.ContNS, Name: "nb0"},
			testutil.VethEnd{NS: peerNS, Name: "eth0", Addrs: []string{"10.1.3.1/24"}})).To(Succeed())
		h := testutil.Handle(env.ContNS)
		nb, err := h.LinkByName("nb0")
		Expect(err).NotTo(HaveOccurred())
		Expect(h.LinkSetMaster(nb, br)).To(Succeed())
		return br, peerNS
	}

	DescribeTableSubtree("every spec version", func(ver string) {
		It("makes a persistent tap with the IPAM address and reports it", func() {
			o := netOpts{ver: ver, dataDir: env.DataDir}
			res := env.Add(o.ver, "c1", env.ContNS, o.json())
			Expect(res.IPs).To(HaveLen(1))
			Expect(res.IPs[0].Address.String()).To(MatchRegexp(`^10\.1\.2\.\d+/24$`))
			t := testutil.LinkAs[*netlink.Tuntap](env.ContNS, "tap0")
			Expect(t.Mode).To(Equal(netlink.TUNTAP_MODE_TAP))
			Expect(t.NonPersist).To(BeFalse())
			Expect(t.Flags & netlink.TUNTAP_MULTI_QUEUE).To(BeZero())
			Expect(t.Alias).To(Equal("cni:c1:tap0"))
			Expect(t.Flags & netlink.TUNTAP_NO_PI).NotTo(BeZero())
			if testutil.AtLeast(ver, "0.3.0") {
				Expect(res.Interfaces).To(HaveLen(1))
				Expect(res.Interfaces[0].Name).To(Equal("tap0"))
				Expect(res.Interfaces[0].Sandbox).To(Equal(env.ContNS.Path()))
				Expect(res.Interfaces[0].Mac).To(Equal(t.HardwareAddr.String()))
				Expect(*res.IPs[0].Interface).To(Equal(0))
			}
			Expect(testutil.Addrs(env.ContNS, "tap0")).To(ConsistOf(res.IPs[0].Address.String()))
			Expect(testutil.Routes(env.ContNS)).To(ContainElement("10.200.0.0/16 via 10.1.2.1 dev tap0"))
			Expect(testutil.LinkNames(env.HostNS)).To(ConsistOf("lo"))
		})

		It("survives ADD, CHECK, DEL, DEL and leaves nothing behind", func() {
			o := netOpts{ver: ver, dataDir: env.DataDir}
			before := env.Snapshot()
			res := env.Add(o.ver, "c1", env.ContNS, o.json())
			if testutil.AtLeast(ver, "0.4.0") {
				env.Must("CHECK", "c1", env.ContNS, o.withPrev(res).json())
			}
			env.Must("DEL", "c1", env.ContNS, o.json())
			Expect(env.Snapshot()).To(Equal(before))
			env.Must("DEL", "c1", env.ContNS, o.json())
			Expect(env.Snapshot()).To(Equal(before))
		})

		It("releases the address on DEL without a netns", func() {
			o := netOpts{ver: ver, dataDir: env.DataDir}
			env.Add(o.ver, "c1", env.ContNS, o.json())
			Expect(testutil.Reservations(env.DataDir)).To(HaveLen(1))
			env.Must("DEL", "c1", nil, o.json())
			Expect(testutil.Reservations(env.DataDir)).To(BeEmpty())
		})
	}, testutil.VersionEntries())

	It("DEL removes the tap and releases the address with a config that no longer validates", func() {
		// A config edited between ADD and DEL must not keep the attachment
		// from being removed (issue 22).
		before := env.Snapshot()
		env.Add("1.1.0", "c1", env.ContNS, netOpts{ver: "1.1.0", dataDir: env.DataDir}.json())
		edited := netOpts{ver: "1.1.0", dataDir: env.DataDir, mtu: 5, owner: u32(^uint32(0))}.json()
		out := env.Run("ADD", "c2", env.ContNS, edited)
		testutil.ExpectCode(out, types.ErrInvalidNetworkConfig, "ADD still refuses it")
		env.Must("DEL", "c1", env.ContNS, edited)
		Expect(env.Snapshot()).To(Equal(before))
		env.Must("DEL", "c1", env.ContNS, edited)
	})

	It("carries owner, group and multi-queue as the kernel reports them", func() {
		o := netOpts{ver: "1.1.0", multiQueue: true, owner: u32(1000), group: u32(2000), mtu: 1400, mac: "02:11:22:33:44:55"}
		res := env.Add(o.ver, "c1", env.ContNS, o.json())
		t := testutil.LinkAs[*netlink.Tuntap](env.ContNS, "tap0")
		Expect(t.Owner).To(BeEquivalentTo(1000))
		Expect(t.Group).To(BeEquivalentTo(2000))
		Expect(t.Flags & netlink.TUNTAP_MULTI_QUEUE).NotTo(BeZero())
		Expect(t.MTU).To(Equal(1400))
		Expect(t.HardwareAddr.String()).To(Equal("02:11:22:33:44:55"))
		Expect(res.Interfaces[0].Mac).To(Equal("02:11:22:33:44:55"))
		Expect(res.IPs).To(BeEmpty())
		env.Must("CHECK", "c1", env.ContNS, o.withPrev(res).json())

		// A VMM opens two queues of the multi-queue tap.
		openTap(env.ContNS, "tap0", true)
		openTap(env.ContNS, "tap0", true)
	})

	Describe("selinuxContext", func() {
		const ctx = "system_u:system_r:container_t:s0"
		It("is ignored when SELinux is off", func() {
			o := netOpts{ver: "1.1.0", dataDir: env.DataDir, extraKeys: `"selinuxContext": "` + ctx + `"`}
			out := testutil.MustRunIn(env.HostNS, tap.WithSELinux(false, attach.Hooks{}), env.Call("ADD", "c1", env.ContNS, o.json()))
			Expect(testutil.ParseResult("1.1.0", out.Stdout).Interfaces).To(HaveLen(1))
			Expect(testutil.LinkNames(env.ContNS)).To(ConsistOf("lo", "tap0"))
		})
		It("is set on the tap's thread when SELinux is on: a context the kernel refuses fails ADD and leaves nothing", func() {
			// This host runs no SELinux, so the kernel refuses any context
			// written to the thread's attr/current: that write is what on.
			before := env.Snapshot()
			o := netOpts{ver: "1.1.0", dataDir: env.DataDir, extraKeys: `"selinuxContext": "` + ctx + `"`}
			out := testutil.RunIn(env.HostNS, tap.WithSELinux(true, attach.Hooks{}), env.Call("ADD", "c1", env.ContNS, o.json()))
			Expect(out.Err).NotTo(BeNil())
			Expect(out.Err.Msg).To(ContainSubstring(`selinuxContext: set "` + ctx + `"`))
			Expect(env.Snapshot()).To(Equal(before))
		})
	})

	It("ends ADD, DEL, ADD in the same state as one ADD", func() {
		bridgeIn(env.ContNS)
		o := netOpts{ver: "1.1.0", dataDir: env.DataDir, bridge: "br0", mac: "02:11:22:33:44:55", oneIP: true}
		env.Add(o.ver, "c1", env.ContNS, o.json())
		first := env.Snapshot()
		env.Must("DEL", "c1", env.ContNS, o.json())
		env.Add(o.ver, "c1", env.ContNS, o.json())
		Expect(env.Snapshot()).To(Equal(first))
	})

	It("undoes everything when the kernel refuses the MAC", func() {
		// All zeros passes parsing; the kernel refuses it for an ethernet
		// link once the tap exists.
		before := env.Snapshot()
		o := netOpts{ver: "1.1.0", dataDir: env.DataDir, mac: "00:00:00:00:00:00"}
		out := env.Run("ADD", "c1", env.ContNS, o.json())
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Msg).To(ContainSubstring("mac: set 00:00:00:00:00:00"))
		Expect(env.Snapshot()).To(Equal(before))
	})

	It("takes runtimeConfig.mac over the mac key", func() {
		o := netOpts{ver: "1.1.0", mac: "02:11:22:33:44:55", extraKeys: `"runtimeConfig": {"mac": "02:aa:bb:cc:dd:ee"}`}
		res := env.Add(o.ver, "c1", env.ContNS, o.json())
		Expect(testutil.LinkAs[*netlink.Tuntap](env.ContNS, "tap0").HardwareAddr.String()).To(Equal("02:aa:bb:cc:dd:ee"))
		Expect(res.Interfaces[0].Mac).To(Equal("02:aa:bb:cc:dd:ee"))
	})

	It("brings frames to the VMM that opens the tap", func() {
		o := netOpts{ver: "1.1.0", dataDir: env.DataDir}
		res := env.Add(o.ver, "c1", env.ContNS, o.json())
		v := openTap(env.ContNS, "tap0", false)
		Expect(sendUDP(env.ContNS, "10.1.2.77")).To(Succeed())
		mac, ip, err := v.arpRequestFor(net.ParseIP("10.1.2.77"), 10*time.Second)
		Expect(err).NotTo(HaveOccurred())
		Expect(mac.String()).To(Equal(res.Interfaces[0].Mac))
		Expect(ip.Equal(res.IPs[0].Address.IP)).To(BeTrue(), "ARP from %s", ip)
	})

	It("carries a ping between the container and a VM behind the tap", func() {
		o := netOpts{ver: "1.1.0", dataDir: env.DataDir}
		env.Add(o.ver, "c1", env.ContNS, o.json())
		v := openTap(env.ContNS, "tap0", false)
		v.answer(net.HardwareAddr{2, 0, 0, 0, 0, 0x77}, net.ParseIP("10.1.2.77"))
		Expect(testutil.Ping(env.ContNS, "10.1.2.77")).To(Succeed())
	})

	It("carries a ping through the bridge to a VM behind the tap", func() {
		_, peerNS := bridgeWithPeer()
		env.Add("1.1.0", "c1", env.ContNS, netOpts{ver: "1.1.0", bridge: "br0"}.json())
		v := openTap(env.ContNS, "tap0", false)
		v.answer(net.HardwareAddr{2, 0, 0, 0, 0, 0x78}, net.ParseIP("10.1.3.2"))
		Expect(testutil.Ping(peerNS, "10.1.3.2")).To(Succeed())
	})

	It("makes the tap a port of an existing bridge, which floods to it", func() {
		br, peerNS := bridgeWithPeer()

		o := netOpts{ver: "1.1.0", bridge: "br0"}
		res := env.Add(o.ver, "c1", env.ContNS, o.json())
		Expect(testutil.LinkAs[*netlink.Tuntap](env.ContNS, "tap0").MasterIndex).To(Equal(br.Index))
		env.Must("CHECK", "c1", env.ContNS, o.withPrev(res).json())

		v := openTap(env.ContNS, "tap0", false)
		Expect(sendUDP(peerNS, "10.1.3.2")).To(Succeed())
		_, ip, err := v.arpRequestFor(net.ParseIP("10.1.3.2"), 10*time.Second)
		Expect(err).NotTo(HaveOccurred())
		Expect(ip.String()).To(Equal("10.1.3.1"))

		env.Must("DEL", "c1", env.ContNS, o.json())
		Expect(testutil.LinkNames(env.ContNS)).To(ConsistOf("lo", "br0", "nb0"))
	})

	DescribeTable("leaves no tap behind when the config cannot be applied",
		func(o netOpts, code uint, errHas string) {
			before := env.Snapshot()
			out := env.Run("ADD", "c1", env.ContNS, o.json())
			testutil.ExpectCode(out, code)
			Expect(out.Err.Msg).To(ContainSubstring(errHas))
			Expect(env.Snapshot()).To(Equal(before))
		},
		Entry("a bad mac", netOpts{ver: "1.1.0", mac: "02:zz"}, uint(types.ErrInvalidNetworkConfig), `mac: "02:zz"`),
		Entry("a multicast mac", netOpts{ver: "1.1.0", mac: "01:00:00:00:00:01"}, uint(types.ErrInvalidNetworkConfig), "multicast"),
		Entry("a missing bridge", netOpts{ver: "1.1.0", bridge: "nobr0"}, uint(types.ErrInvalidNetworkConfig), `bridge: "nobr0" not found in /run/netns/`),
	)

	It("refuses a bridge that is not a bridge with code 7 and makes nothing", func() {
		h := testutil.Handle(env.ContNS)
		la := netlink.NewLinkAttrs()
		la.Name = "v0"
		Expect(h.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "v1"})).To(Succeed())
		before := env.Snapshot()
		out := env.Run("ADD", "c1", env.ContNS, netOpts{ver: "1.1.0", bridge: "v0", dataDir: env.DataDir}.json())
		testutil.ExpectCode(out, types.ErrInvalidNetworkConfig)
		Expect(out.Err.Msg).To(ContainSubstring(`bridge: "v0" in /run/netns/`))
		Expect(env.Snapshot()).To(Equal(before))
	})

	It("refuses an interface name already in use and leaves that link alone", func() {
		// An existing tap of that name: without IFF_TUN_EXCL the kernel
		// would attach to it instead of refusing.
		Expect(env.ContNS.Do(func() error {
			return netlink.LinkAdd(&netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: "tap0"}, Mode: netlink.TUNTAP_MODE_TAP})
		})).To(Succeed())
		before := env.Snapshot()
		o := netOpts{ver: "1.1.0", dataDir: env.DataDir}
		out := env.Run("ADD", "c1", env.ContNS, o.json())
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Msg).To(ContainSubstring(`"tap0" already exists`))
		Expect(env.Snapshot()).To(Equal(before))
	})

	It("runs IPAM with the tap up in the container, as upstream (the dhcp IPAM plugin needs it)", func() {
		dir := GinkgoT().TempDir()
		testutil.ProbeIPAM(dir, "10.54.0.2/24")
		o := netOpts{ver: "1.1.0", extraKeys: `"ipam": {"type": "probe-ipam"}`}
		c := env.Call("ADD", "c1", env.ContNS, o.json())
		c.Path = dir
		out := testutil.AtIPAMAdd(dir, func() testutil.Output { return testutil.RunIn(env.HostNS, tap.Plugin, c) }, func() {
			l, err := testutil.Handle(env.ContNS).LinkByName("tap0")
			Expect(err).NotTo(HaveOccurred(), "tap0 in the container at IPAM ADD")
			Expect(l.Attrs().Flags&net.FlagUp).NotTo(BeZero(), "tap0 up in the container at IPAM ADD")
		})
		Expect(out.Err).To(BeNil())
		c.Command = "DEL"
		Expect(testutil.RunIn(env.HostNS, tap.Plugin, c).Err).To(BeNil())
	})

	Describe("a failure midway through ADD", func() {
		for _, step := range tap.AddSteps {
			It("leaves nothing behind after "+step, func() {
				bridgeIn(env.ContNS)
				o := netOpts{ver: "1.1.0", dataDir: env.DataDir, bridge: "br0", mtu: 1400, mac: "02:11:22:33:44:55"}
				before := env.Snapshot()
				p := tap.WithSELinux(false, attach.Hooks{AfterStep: testutil.FailAfter(step, nil)})
				out := testutil.RunIn(env.HostNS, p, env.Call("ADD", "c1", env.ContNS, o.json()))
				Expect(out.Err).NotTo(BeNil())
				Expect(out.Err.Msg).To(ContainSubstring("injected failure"))
				Expect(env.Snapshot()).To(Equal(before))
				env.Add(o.ver, "c1", env.ContNS, o.json()) // and the same ADD then succeeds
			})
			It("leaves nothing behind after a panic after "+step, func() {
				bridgeIn(env.ContNS)
				o := netOpts{ver: "1.1.0", dataDir: env.DataDir, bridge: "br0"}
				before := env.Snapshot()
				out := testutil.RunIn(env.HostNS, tap.New(attach.Hooks{AfterStep: testutil.PanicAfter(step)}), env.Call("ADD", "c1", env.ContNS, o.json()))
				testutil.ExpectCode(out, types.ErrInternal)
				Expect(env.Snapshot()).To(Equal(before))
			})
		}
	})

	Describe("DEL", func() {
		It("succeeds twice when the namespace was destroyed, and releases the address", func() {
			gone, cleanup := testutil.NewRemovableNS()
			o := netOpts{ver: "1.1.0", dataDir: env.DataDir}
			env.Add(o.ver, "c1", gone, o.json())
			cleanup()
			c := env.Call("DEL", "c1", gone, o.json())
			testutil.MustRunIn(env.HostNS, tap.Plugin, c)
			testutil.MustRunIn(env.HostNS, tap.Plugin, c)
			Expect(testutil.Reservations(env.DataDir)).To(BeEmpty())
		})

		It("leaves another plugin's interface of the same name alone", func() {
			h := testutil.Handle(env.ContNS)
			la := netlink.NewLinkAttrs()
			la.Name = "tap0"
			Expect(h.LinkAdd(&netlink.Bridge{LinkAttrs: la})).To(Succeed())
			env.Must("DEL", "c1", env.ContNS, netOpts{ver: "1.1.0"}.json())
			Expect(testutil.LinkNames(env.ContNS)).To(ConsistOf("lo", "tap0"))
		})

		It("leaves another attachment's tap alone, and removes an untagged one (upstream's)", func() {
			o := netOpts{ver: "1.1.0"}
			env.Add(o.ver, "other", env.ContNS, o.json())
			env.Must("DEL", "c1", env.ContNS, o.json())
			Expect(testutil.LinkNames(env.ContNS)).To(ConsistOf("lo", "tap0"))

			h := testutil.Handle(env.ContNS)
			l, err := h.LinkByName("tap0")
			Expect(err).NotTo(HaveOccurred())
			Expect(h.LinkSetAlias(l, "")).To(Succeed())
			env.Must("DEL", "c1", env.ContNS, o.json())
			Expect(testutil.LinkNames(env.ContNS)).To(ConsistOf("lo"))
		})
	})

	DescribeTable("CHECK catches",
		func(breakIt func(res *current.Result), errHas string) {
			bridgeIn(env.ContNS)
			o := netOpts{ver: "1.1.0", dataDir: env.DataDir, bridge: "br0", mtu: 1400}
			res := env.Add(o.ver, "c1", env.ContNS, o.json())
			checkCall := env.Call("CHECK", "c1", env.ContNS, o.withPrev(res).json())
			testutil.MustRunIn(env.HostNS, tap.Plugin, checkCall)
			breakIt(res)
			out := testutil.RunIn(env.HostNS, tap.Plugin, checkCall)
			Expect(out.Err).NotTo(BeNil())
			Expect(out.Err.Msg).To(ContainSubstring(errHas))
		},
		Entry("a deleted tap", func(*current.Result) {
			Expect(testutil.Handle(env.ContNS).LinkDel(&netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: "tap0"}})).To(Succeed())
		}, `"tap0"`),
		Entry("a tap that is down", func(*current.Result) {
			h := testutil.Handle(env.ContNS)
			l, _ := h.LinkByName("tap0")
			Expect(h.LinkSetDown(l)).To(Succeed())
		}, `"tap0" is down`),
		Entry("a changed MAC", func(*current.Result) {
			h := testutil.Handle(env.ContNS)
			l, _ := h.LinkByName("tap0")
			Expect(h.LinkSetHardwareAddr(l, net.HardwareAddr{2, 0xde, 0xad, 0, 0, 9})).To(Succeed())
		}, "prevResult says"),
		Entry("a changed MTU", func(*current.Result) {
			h := testutil.Handle(env.ContNS)
			l, _ := h.LinkByName("tap0")
			Expect(h.LinkSetMTU(l, 1300)).To(Succeed())
		}, "MTU 1300, the config says 1400"),
		Entry("a tap off the bridge", func(*current.Result) {
			h := testutil.Handle(env.ContNS)
			l, _ := h.LinkByName("tap0")
			Expect(h.LinkSetNoMaster(l)).To(Succeed())
		}, `not a port of bridge "br0"`),
		Entry("a deleted address", func(res *current.Result) {
			h := testutil.Handle(env.ContNS)
			l, _ := h.LinkByName("tap0")
			Expect(h.AddrDel(l, &netlink.Addr{IPNet: &res.IPs[0].Address})).To(Succeed())
		}, "lacks address 10.1.2."),
		Entry("a deleted route", func(*current.Result) {
			h := testutil.Handle(env.ContNS)
			l, _ := h.LinkByName("tap0")
			_, dst, _ := net.ParseCIDR("10.200.0.0/16")
			Expect(h.RouteDel(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: dst})).To(Succeed())
		}, "lacks route 10.200.0.0/16"),
	)

	It("CHECK catches an owner the config does not name", func() {
		o := netOpts{ver: "1.1.0", owner: u32(1000)}
		res := env.Add(o.ver, "c1", env.ContNS, o.json())
		o2 := o.withPrev(res)
		o2.owner = u32(1001)
		out := env.Run("CHECK", "c1", env.ContNS, o2.json())
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Msg).To(ContainSubstring("owner 1000, config says 1001"))
	})

	Describe("bad input", func() {
		expectNothingMade := func() {
			GinkgoHelper()
			Expect(testutil.LinkNames(env.ContNS)).To(ConsistOf("lo"))
			Expect(testutil.Reservations(env.DataDir)).To(BeEmpty())
		}
		testutil.RefusalSpecs(func(c testutil.Call) testutil.Output { return testutil.RunIn(env.HostNS, tap.Plugin, c) },
			func(ver string) testutil.Call {
				return env.Call("ADD", "c1", env.ContNS, netOpts{ver: ver, dataDir: env.DataDir}.json())
			},
			expectNothingMade)
		It("rejects an invalid value with code 7 naming the key", func() {
			out := env.Run("ADD", "c1", env.ContNS, netOpts{ver: "1.1.0", dataDir: env.DataDir, mtu: 12}.json())
			testutil.ExpectCode(out, types.ErrInvalidNetworkConfig)
			Expect(out.Err.Msg).To(ContainSubstring("mtu: 12"))
			expectNothingMade()
		})
		It("refuses its own namespace as CNI_NETNS with code 8", func() {
			out := env.Run("ADD", "c1", env.HostNS, netOpts{ver: "1.1.0", dataDir: env.DataDir}.json())
			testutil.ExpectCode(out, types.ErrInvalidNetNS)
			Expect(testutil.LinkNames(env.HostNS)).To(ConsistOf("lo"))
			expectNothingMade()
		})
	})

	It("works as the built binary, and answers GC and STATUS with only CNI_COMMAND and CNI_PATH", func() {
		o := netOpts{ver: "1.1.0", dataDir: env.DataDir, multiQueue: true, owner: u32(1000)}
		var out testutil.Output
		Expect(env.HostNS.Do(func() (err error) {
			out, err = testutil.Exec("tap", env.Call("ADD", "c1", env.ContNS, o.json()))
			return err
		})).To(Succeed())
		Expect(out.Err).To(BeNil(), "stderr: %s", out.Stderr)
		Expect(testutil.LinkAs[*netlink.Tuntap](env.ContNS, "tap0").Owner).To(BeEquivalentTo(1000))
		gc := o
		gc.extraKeys = `"cni.dev/valid-attachments": []`
		for _, cmd := range []string{"GC", "STATUS"} {
			Expect(env.HostNS.Do(func() (err error) {
				out, err = testutil.Exec("tap", testutil.Call{Command: cmd, Stdin: gc.json()})
				return err
			})).To(Succeed())
			Expect(out.Err).To(BeNil(), "%s: stderr %s", cmd, out.Stderr)
		}
		Expect(testutil.Reservations(env.DataDir)).To(BeEmpty(), "GC with an empty list releases the address")
		Expect(env.HostNS.Do(func() (err error) {
			out, err = testutil.Exec("tap", env.Call("DEL", "c1", env.ContNS, o.json()))
			return err
		})).To(Succeed())
		Expect(out.Err).To(BeNil(), "stderr: %s", out.Stderr)
		Expect(testutil.LinkNames(env.ContNS)).To(ConsistOf("lo"))
	})
})
