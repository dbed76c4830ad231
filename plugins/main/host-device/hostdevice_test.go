package hostdevice_test

import (
	"fmt"
	"net"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/kernelfeature"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/pkg/testutil"
	hostdevice "github.com/cniforge/plugins/plugins/main/host-device"
)

const (
	netName  = "hd-net"
	peerAddr = "10.1.4.1"
)

var _ = Describe("host-device", func() {
	var (
		hostNS, contNS, peerNS *ns.NetNS
		dataDir                string
		fs                     sysfsTree
	)

	BeforeEach(func() {
		hostNS = testutil.NewNS()
		contNS = testutil.NewNS()
		peerNS = testutil.NewNS()
		dataDir = GinkgoT().TempDir()
		fs = newSysfs()
		// The device: veth end "dev0" in the stand-in host, its peer in
		// peerNS with peerAddr, the far side of the container's traffic.
		Expect(testutil.ConnectNS(testutil.VethEnd{NS: hostNS, Name: "dev0"},
			testutil.VethEnd{NS: peerNS, Name: "eth0", Addrs: []string{peerAddr + "/24"}})).To(Succeed())
	})

	// hd is the plugin reading the spec's sysfs tree.
	hd := func() plugin.Plugin { return hostdevice.New(attach.Hooks{}, fs.root()) }
	// conf is a config picking the device with keys, with host-local on
	// 10.1.4.0/24 unless noIPAM.
	conf := func(ver, keys string, noIPAM bool) []byte {
		s := fmt.Sprintf(`{"cniVersion": %q, "name": %q, "type": "host-device", %s`, ver, netName, keys)
		if !noIPAM {
			s += fmt.Sprintf(`, "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": "10.1.4.0/24", "rangeStart": "10.1.4.10"}]], "routes": [{"dst": "10.200.0.0/16", "gw": "10.1.4.1"}]}`, dataDir)
		}
		return []byte(s + "}")
	}
	call := func(cmd string, n *ns.NetNS, stdin []byte) testutil.Call {
		return testutil.NewCall(cmd, "c1", "net1", n, stdin)
	}
	run := func(cmd string, n *ns.NetNS, stdin []byte) testutil.Output {
		return testutil.RunIn(hostNS, hd(), call(cmd, n, stdin))
	}
	mustRun := func(cmd string, n *ns.NetNS, stdin []byte) testutil.Output {
		GinkgoHelper()
		return testutil.MustRunIn(hostNS, hd(), call(cmd, n, stdin))
	}
	withPrev := func(stdin []byte, ver string, res *current.Result) []byte {
		GinkgoHelper()
		return testutil.WithPrev(stdin, testutil.PrintResult(res, ver))
	}
	snapshot := func() testutil.Snapshot {
		GinkgoHelper()
		return testutil.TakeSnapshot(hostNS, contNS, dataDir)
	}
	linkIn := func(n *ns.NetNS, name string) netlink.Link {
		GinkgoHelper()
		l, err := testutil.Handle(n).LinkByName(name)
		Expect(err).NotTo(HaveOccurred())
		return l
	}
	devMAC := func() string {
		GinkgoHelper()
		return linkIn(hostNS, "dev0").Attrs().HardwareAddr.String()
	}

	DescribeTableSubtree("every spec version", func(ver string) {
		It("moves the device in under CNI_IFNAME, with the address, and reaches the peer", func() {
			mac := devMAC()
			stdin := conf(ver, `"device": "dev0"`, false)
			res := testutil.ParseResult(ver, mustRun("ADD", contNS, stdin).Stdout)
			Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo"))
			l := linkIn(contNS, "net1")
			Expect(l.Attrs().Alias).To(Equal("dev0"), "the original name is kept in the alias")
			Expect(l.Attrs().HardwareAddr.String()).To(Equal(mac))
			Expect(res.IPs).To(HaveLen(1))
			Expect(res.IPs[0].Address.String()).To(Equal("10.1.4.10/24"))
			if testutil.AtLeast(ver, "0.3.0") {
				Expect(res.Interfaces).To(HaveLen(1))
				Expect(res.Interfaces[0].Name).To(Equal("net1"))
				Expect(res.Interfaces[0].Mac).To(Equal(mac))
				Expect(res.Interfaces[0].Sandbox).To(Equal(contNS.Path()))
			}
			Expect(testutil.Addrs(contNS, "net1")).To(ConsistOf("10.1.4.10/24"))
			Expect(testutil.Routes(contNS)).To(ContainElement("10.200.0.0/16 via 10.1.4.1 dev net1"))
			Expect(testutil.Ping(contNS, peerAddr)).To(Succeed())
		})

		It("survives ADD, CHECK, DEL, DEL and returns the device under its name", func() {
			before := snapshot()
			stdin := conf(ver, `"device": "dev0"`, false)
			res := testutil.ParseResult(ver, mustRun("ADD", contNS, stdin).Stdout)
			if testutil.AtLeast(ver, "0.4.0") {
				mustRun("CHECK", contNS, withPrev(stdin, ver, res))
			}
			mustRun("DEL", contNS, stdin)
			Expect(snapshot()).To(Equal(before))
			Expect(linkIn(hostNS, "dev0").Attrs().Alias).To(BeEmpty())
			mustRun("DEL", contNS, stdin)
			Expect(snapshot()).To(Equal(before))
		})

		It("releases the address on DEL without a netns", func() {
			stdin := conf(ver, `"device": "dev0"`, false)
			mustRun("ADD", contNS, stdin)
			mustRun("DEL", nil, stdin)
			Expect(testutil.Reservations(dataDir)).To(BeEmpty())
		})
	}, testutil.VersionEntries())

	DescribeTable("picks the device",
		func(keys func() string) {
			mac := devMAC()
			stdin := conf("1.1.0", keys(), false)
			res := testutil.ParseResult("1.1.0", mustRun("ADD", contNS, stdin).Stdout)
			Expect(linkIn(contNS, "net1").Attrs().HardwareAddr.String()).To(Equal(mac))
			Expect(testutil.Ping(contNS, peerAddr)).To(Succeed())
			mustRun("CHECK", contNS, withPrev(stdin, "1.1.0", res))
			mustRun("DEL", contNS, stdin)
			Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo", "dev0"))
		},
		Entry("by hwaddr", func() string { return `"hwaddr": "` + devMAC() + `"` }),
		Entry("by hwaddr in upper case", func() string { return `"hwaddr": "` + upper(devMAC()) + `"` }),
		Entry("by kernelpath", func() string {
			fs.netdev("devices/virtual/hd-test", "dev0")
			return `"kernelpath": "/sys/devices/virtual/hd-test"`
		}),
		Entry("by pciBusID", func() string {
			fs.netdev("bus/pci/devices/0000:00:05.0", "dev0")
			return `"pciBusID": "0000:00:05.0"`
		}),
		Entry("by runtimeConfig.deviceID (PCI)", func() string {
			fs.netdev("bus/pci/devices/0000:af:00.1", "dev0")
			return `"runtimeConfig": {"deviceID": "0000:af:00.1"}`
		}),
		Entry("by runtimeConfig.deviceID (auxiliary)", func() string {
			fs.netdev("bus/auxiliary/devices/mlx5_core.sf.4", "dev0")
			return `"runtimeConfig": {"deviceID": "mlx5_core.sf.4"}`
		}),
	)

	It("DEL returns the device and releases the address with a config that no longer validates", func() {
		// A config edited between ADD and DEL must not keep the device in
		// the container for good (issue 22).
		before := snapshot()
		mustRun("ADD", contNS, conf("1.1.0", `"device": "dev0"`, false))
		edited := conf("1.1.0", `"device": "dev0", "hwaddr": "nope"`, false)
		out := run("ADD", contNS, edited)
		testutil.ExpectCode(out, types.ErrInvalidNetworkConfig, "ADD still refuses it")
		mustRun("DEL", contNS, edited)
		Expect(snapshot()).To(Equal(before))
		mustRun("DEL", contNS, edited)
	})

	It("moves a device whose name the container also uses, through a temporary name", func() {
		h := testutil.Handle(contNS)
		la := netlink.NewLinkAttrs()
		la.Name = "dev0"
		Expect(h.LinkAdd(&netlink.Bridge{LinkAttrs: la})).To(Succeed())
		stdin := conf("1.1.0", `"device": "dev0"`, false)
		mustRun("ADD", contNS, stdin)
		Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo", "dev0", "net1"))
		mustRun("DEL", contNS, stdin)
		Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo", "dev0"))
		Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo", "dev0"))
	})

	It("ends ADD, DEL, ADD in the same state as one ADD", func() {
		// A range of one address, so that both ADDs get the same.
		stdin := []byte(strings.Replace(string(conf("1.1.0", `"device": "dev0"`, false)), `"rangeStart": "10.1.4.10"`, `"rangeStart": "10.1.4.10", "rangeEnd": "10.1.4.10"`, 1))
		mustRun("ADD", contNS, stdin)
		first := snapshot()
		mustRun("DEL", contNS, stdin)
		mustRun("ADD", contNS, stdin)
		Expect(snapshot()).To(Equal(first))
	})

	It("brings up a device that was down in the host without IPAM, as upstream", func() {
		// issue 22, defect 4.
		Expect(testutil.Handle(hostNS).LinkSetDown(linkIn(hostNS, "dev0"))).To(Succeed())
		stdin := conf("1.1.0", `"device": "dev0"`, true)
		res := testutil.ParseResult("1.1.0", mustRun("ADD", contNS, stdin).Stdout)
		Expect(linkIn(contNS, "net1").Attrs().Flags & net.FlagUp).NotTo(BeZero())
		mustRun("CHECK", contNS, withPrev(stdin, "1.1.0", res))
		mustRun("DEL", contNS, stdin)
		Expect(linkIn(hostNS, "dev0").Attrs().Flags & net.FlagUp).To(BeZero())
	})

	It("keeps the device's up state without IPAM, and is layer 2 only", func() {
		stdin := conf("1.1.0", `"device": "dev0"`, true)
		res := testutil.ParseResult("1.1.0", mustRun("ADD", contNS, stdin).Stdout)
		Expect(res.IPs).To(BeEmpty())
		Expect(linkIn(contNS, "net1").Attrs().Flags & net.FlagUp).NotTo(BeZero())
		mustRun("CHECK", contNS, withPrev(stdin, "1.1.0", res))
		mustRun("DEL", contNS, stdin)
		Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo", "dev0"))
	})

	It("runs IPAM with the device moved in and up, as upstream (the dhcp IPAM plugin needs it)", func() {
		Expect(testutil.Handle(hostNS).LinkSetDown(linkIn(hostNS, "dev0"))).To(Succeed())
		dir := GinkgoT().TempDir()
		testutil.ProbeIPAM(dir, "10.1.4.20/24")
		stdin := []byte(fmt.Sprintf(`{"cniVersion": "1.1.0", "name": %q, "type": "host-device", "device": "dev0", "ipam": {"type": "probe-ipam"}}`, netName))
		c := call("ADD", contNS, stdin)
		c.Path = dir
		out := testutil.AtIPAMAdd(dir, func() testutil.Output { return testutil.RunIn(hostNS, hd(), c) }, func() {
			Expect(linkIn(contNS, "net1").Attrs().Flags&net.FlagUp).NotTo(BeZero(), "net1 up in the container at IPAM ADD")
		})
		Expect(out.Err).To(BeNil())
		c.Command = "DEL"
		Expect(testutil.RunIn(hostNS, hd(), c).Err).To(BeNil())
		Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo", "dev0"))
	})

	It("touches no link for a PCI device bound to a userspace driver", func() {
		fs.driver("bus/pci/devices/0000:00:06.0", "vfio-pci")
		before := snapshot()
		stdin := conf("1.1.0", `"pciBusID": "0000:00:06.0"`, false)
		res := testutil.ParseResult("1.1.0", mustRun("ADD", contNS, stdin).Stdout)
		Expect(res.Interfaces).To(BeEmpty())
		Expect(res.IPs).To(HaveLen(1))
		Expect(testutil.LinkNames(hostNS)).To(Equal(before.HostLinks))
		Expect(testutil.LinkNames(contNS)).To(Equal(before.ContLinks))
		mustRun("CHECK", contNS, withPrev(stdin, "1.1.0", res))
		mustRun("DEL", contNS, stdin)
		Expect(snapshot()).To(Equal(before))
	})

	It("undoes a move the kernel refuses halfway: name, alias and up state come back", func() {
		// The kernel refuses to move a loopback (ADD refuses it earlier);
		// here moveIn meets that refusal after the rename and the alias.
		hostH := testutil.Handle(hostNS)
		lo := linkIn(hostNS, "lo")
		Expect(hostH.LinkSetAlias(lo, "mine")).To(Succeed())
		lo = linkIn(hostNS, "lo")
		err := hostdevice.MoveIn(hostNS, hostH, contNS, testutil.Handle(contNS), lo, "net1")
		Expect(err).To(MatchError(ContainSubstring(`move "lo"`)))
		lo = linkIn(hostNS, "lo")
		Expect(lo.Attrs().Alias).To(Equal("mine"))
		Expect(lo.Attrs().Flags & net.FlagUp).NotTo(BeZero())
		Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo", "dev0"))
		Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo"))
		Expect(testutil.Ping(hostNS, "127.0.0.1")).To(Succeed())
	})

	Describe("a failure midway through ADD", func() {
		for _, step := range hostdevice.AddSteps {
			It("leaves nothing behind after "+step, func() {
				before := snapshot()
				stdin := conf("1.1.0", `"device": "dev0"`, false)
				p := hostdevice.New(attach.Hooks{AfterStep: testutil.FailAfter(step, nil)}, fs.root())
				out := testutil.RunIn(hostNS, p, call("ADD", contNS, stdin))
				Expect(out.Err).NotTo(BeNil())
				Expect(out.Err.Msg).To(ContainSubstring("injected failure"))
				Expect(snapshot()).To(Equal(before))
				Expect(linkIn(hostNS, "dev0").Attrs().Alias).To(BeEmpty())
				Expect(linkIn(hostNS, "dev0").Attrs().Flags & net.FlagUp).NotTo(BeZero())
				mustRun("ADD", contNS, stdin) // and the same ADD then succeeds
			})
			It("leaves nothing behind after a panic after "+step, func() {
				before := snapshot()
				stdin := conf("1.1.0", `"device": "dev0"`, false)
				p := hostdevice.New(attach.Hooks{AfterStep: testutil.PanicAfter(step)}, fs.root())
				out := testutil.RunIn(hostNS, p, call("ADD", contNS, stdin))
				testutil.ExpectCode(out, types.ErrInternal)
				Expect(snapshot()).To(Equal(before))
			})
		}
	})

	Describe("DEL", func() {
		It("succeeds twice when the namespace was destroyed", func() {
			gone, cleanup := testutil.NewRemovableNS()
			stdin := conf("1.1.0", `"device": "dev0"`, false)
			mustRun("ADD", gone, stdin)
			cleanup()
			mustRun("DEL", gone, stdin)
			mustRun("DEL", gone, stdin)
			Expect(testutil.Reservations(dataDir)).To(BeEmpty())
		})

		DescribeTable("finds a device an ADD killed midway left under the attachment's temporary name",
			func(inContainer bool) {
				// The state a killed ADD leaves after the rename (host) or
				// after the move (container): alias first, then the name.
				tmp := hostdevice.TempName("c1", "net1")
				h := testutil.Handle(hostNS)
				dev := linkIn(hostNS, "dev0")
				Expect(h.LinkSetDown(dev)).To(Succeed())
				Expect(h.LinkSetAlias(dev, "dev0")).To(Succeed())
				Expect(h.LinkSetName(dev, tmp)).To(Succeed())
				if inContainer {
					Expect(h.LinkSetNsFd(linkIn(hostNS, tmp), int(contNS.Fd()))).To(Succeed())
				}
				// Another attachment's DEL leaves it alone.
				other := call("DEL", contNS, conf("1.1.0", `"device": "dev0"`, false))
				other.ContainerID = "c2"
				testutil.MustRunIn(hostNS, hd(), other)
				Expect(testutil.LinkNames(hostNS)).NotTo(ContainElement("dev0"))

				mustRun("DEL", contNS, conf("1.1.0", `"device": "dev0"`, false))
				Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo", "dev0"))
				Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo"))
				Expect(linkIn(hostNS, "dev0").Attrs().Alias).To(BeEmpty())
			},
			Entry("in the host", false),
			Entry("in the container", true),
		)

		It("leaves a host link named CNI_IFNAME alone, whatever its alias", func() {
			// Such a link may be a device the kernel returned from a dead
			// container, or the host's own uplink with an alias: DEL
			// cannot tell them apart and renames neither.
			h := testutil.Handle(hostNS)
			for name, alias := range map[string]string{"net1": "cni:c9:net1", "net2": "lo", "net3": "uplink0"} {
				la := netlink.NewLinkAttrs()
				la.Name = name
				Expect(h.LinkAdd(&netlink.Bridge{LinkAttrs: la})).To(Succeed())
				Expect(h.LinkSetAlias(linkIn(hostNS, name), alias)).To(Succeed())
				c := call("DEL", nil, conf("1.1.0", `"device": "dev0"`, false))
				c.IfName = name
				testutil.MustRunIn(hostNS, hd(), c)
			}
			Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo", "dev0", "net1", "net2", "net3"))
		})

		It("keeps the device in the container while its name is taken in the host, and returns it later", func() {
			stdin := conf("1.1.0", `"device": "dev0"`, false)
			mustRun("ADD", contNS, stdin)
			h := testutil.Handle(hostNS)
			la := netlink.NewLinkAttrs()
			la.Name = "dev0"
			Expect(h.LinkAdd(&netlink.Bridge{LinkAttrs: la})).To(Succeed())
			out := run("DEL", contNS, stdin)
			Expect(out.Err).NotTo(BeNil())
			Expect(out.Err.Msg).To(ContainSubstring(`as "dev0": a link of that name exists there`))
			Expect(testutil.LinkNames(contNS)).To(ContainElement("net1"))

			Expect(h.LinkDel(linkIn(hostNS, "dev0"))).To(Succeed())
			mustRun("DEL", contNS, stdin)
			Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo", "dev0"))
			Expect(linkIn(hostNS, "dev0").Type()).To(Equal("veth"))
		})

		It("leaves a link it did not move in alone", func() {
			h := testutil.Handle(contNS)
			la := netlink.NewLinkAttrs()
			la.Name = "net1"
			Expect(h.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "p1"})).To(Succeed())
			Expect(h.LinkSetAlias(linkIn(contNS, "net1"), "cni:other:net1")).To(Succeed())
			mustRun("DEL", contNS, conf("1.1.0", `"device": "dev0"`, false))
			Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo", "net1", "p1"))
		})
	})

	DescribeTable("CHECK catches",
		func(breakIt func(), errHas string) {
			stdin := conf("1.1.0", `"device": "dev0"`, false)
			res := testutil.ParseResult("1.1.0", mustRun("ADD", contNS, stdin).Stdout)
			check := withPrev(stdin, "1.1.0", res)
			mustRun("CHECK", contNS, check)
			breakIt()
			out := run("CHECK", contNS, check)
			Expect(out.Err).NotTo(BeNil())
			Expect(out.Err.Msg).To(ContainSubstring(errHas))
		},
		Entry("a device that is gone", func() {
			h := testutil.Handle(contNS)
			Expect(h.LinkDel(linkIn(contNS, "net1"))).To(Succeed())
		}, `"net1"`),
		Entry("a lost alias", func() {
			Expect(testutil.Handle(contNS).LinkSetAlias(linkIn(contNS, "net1"), "")).To(Succeed())
		}, "has no alias"),
		Entry("a changed MAC", func() {
			Expect(testutil.Handle(contNS).LinkSetHardwareAddr(linkIn(contNS, "net1"), net.HardwareAddr{2, 0xde, 0xad, 0, 0, 9})).To(Succeed())
		}, "prevResult says"),
		Entry("a deleted address", func() {
			Expect(testutil.Handle(contNS).AddrDel(linkIn(contNS, "net1"), &netlink.Addr{IPNet: testutil.MustCIDR("10.1.4.10/24")})).To(Succeed())
		}, "lacks address 10.1.4.10/24"),
		Entry("a device that is down", func() {
			Expect(testutil.Handle(contNS).LinkSetDown(linkIn(contNS, "net1"))).To(Succeed())
		}, `"net1" is down`),
	)

	Describe("bad input", func() {
		expectNothingMade := func() {
			GinkgoHelper()
			Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo", "dev0"))
			Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo"))
			Expect(testutil.Reservations(dataDir)).To(BeEmpty())
		}
		testutil.RefusalSpecs(func(c testutil.Call) testutil.Output { return testutil.RunIn(hostNS, hd(), c) },
			func(ver string) testutil.Call { return call("ADD", contNS, conf(ver, `"device": "dev0"`, false)) },
			expectNothingMade)
		DescribeTable("rejects with code 7 naming the key",
			func(keys, errHas string) {
				out := run("ADD", contNS, conf("1.1.0", keys, false))
				testutil.ExpectCode(out, types.ErrInvalidNetworkConfig)
				Expect(out.Err.Msg).To(ContainSubstring(errHas))
				expectNothingMade()
			},
			Entry("no selector", `"mtu": 1500`, "specify one of"),
			Entry("a missing device", `"device": "nodev0"`, `device: "nodev0": no such device in the host network namespace`),
			Entry("a missing hwaddr", `"hwaddr": "02:00:00:00:00:99"`, `hwaddr: "02:00:00:00:00:99": no such device`),
			Entry("a missing PCI device", `"pciBusID": "0000:00:09.0"`, `pciBusID: "0000:00:09.0": no device at`),
			Entry("the loopback", `"device": "lo"`, `device: "lo": "lo" is the loopback device`),
		)
		// Upstream's getLink tries "device" before a PCI address: a config
		// with both moves the named device, and DEL gives it back.
		It("moves the device \"device\" names when pciBusID is given too", func() {
			stdin := conf("1.1.0", `"device": "dev0", "pciBusID": "0000:00:05.0"`, false)
			mustRun("ADD", contNS, stdin)
			Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo", "net1"))
			Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo"))
			mustRun("DEL", contNS, stdin)
			Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo", "dev0"))
		})
		It("refuses a CNI_IFNAME the container already has, changing nothing", func() {
			h := testutil.Handle(contNS)
			la := netlink.NewLinkAttrs()
			la.Name = "net1"
			Expect(h.LinkAdd(&netlink.Bridge{LinkAttrs: la})).To(Succeed())
			out := run("ADD", contNS, conf("1.1.0", `"device": "dev0"`, false))
			Expect(out.Err).NotTo(BeNil())
			Expect(out.Err.Msg).To(ContainSubstring(`"net1" already exists`))
			Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo", "dev0"))
			Expect(testutil.Reservations(dataDir)).To(BeEmpty())
		})
	})

	It("works as the built binary, and answers GC and STATUS with only CNI_COMMAND and CNI_PATH", func() {
		stdin := conf("1.1.0", `"device": "dev0"`, false)
		out := testutil.ExecIn(hostNS, "host-device", call("ADD", contNS, stdin))
		Expect(out.Err).To(BeNil(), "stderr: %s", out.Stderr)
		Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo", "net1"))
		for _, cmd := range []string{"GC", "STATUS"} {
			gc := []byte(string(stdin[:len(stdin)-1]) + `, "cni.dev/valid-attachments": [{"containerID": "c1", "ifname": "net1"}]}`)
			out = testutil.ExecIn(hostNS, "host-device", testutil.Call{Command: cmd, Stdin: gc})
			Expect(out.Err).To(BeNil(), "%s: stderr %s", cmd, out.Stderr)
		}
		Expect(testutil.Reservations(dataDir)).To(HaveLen(1), "GC keeps a listed attachment's address")
		out = testutil.ExecIn(hostNS, "host-device", call("DEL", contNS, stdin))
		Expect(out.Err).To(BeNil(), "stderr: %s", out.Stderr)
		Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo", "dev0"))
	})

	It("moves a dummy in and back", Label(kernelfeature.Label), func() {
		kernelfeature.Require(kernelfeature.Dummy)
		h := testutil.Handle(hostNS)
		la := netlink.NewLinkAttrs()
		la.Name = "dummy7"
		Expect(h.LinkAdd(&netlink.Dummy{LinkAttrs: la})).To(Succeed())
		before := snapshot()
		stdin := conf("1.1.0", `"device": "dummy7"`, false)
		res := testutil.ParseResult("1.1.0", mustRun("ADD", contNS, stdin).Stdout)
		Expect(linkIn(contNS, "net1").Type()).To(Equal("dummy"))
		Expect(testutil.Addrs(contNS, "net1")).To(ConsistOf("10.1.4.10/24"))
		mustRun("CHECK", contNS, withPrev(stdin, "1.1.0", res))
		mustRun("DEL", contNS, stdin)
		Expect(snapshot()).To(Equal(before))
		Expect(linkIn(hostNS, "dummy7").Type()).To(Equal("dummy"))
		mustRun("DEL", contNS, stdin)
	})
})

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'f' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}
