package ptp_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/masq"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/main/ptp"
)

var _ = Describe("ptp", func() {
	var (
		hostNS, contNS *ns.NetNS
		dataDir        string
	)

	BeforeEach(func() { hostNS, contNS, dataDir = testutil.NewAttachNS() })

	call := func(cmd, id string, n *ns.NetNS, stdin []byte) testutil.Call {
		return testutil.NewCall(cmd, id, "eth0", n, stdin)
	}
	// add runs ADD for container id in n and returns the result as current.
	add := func(o netOpts, id string, n *ns.NetNS) *current.Result {
		GinkgoHelper()
		return testutil.AddResult(hostNS, ptpPlugin, o.ver, call("ADD", id, n, o.json()))
	}
	// withPrev returns o carrying res (printed in o.ver) as prevResult.
	withPrev := func(o netOpts, res *current.Result) netOpts {
		GinkgoHelper()
		o.prevRes = testutil.PrintResult(res, o.ver)
		return o
	}

	DescribeTableSubtree("every spec version", func(ver string) {
		It("wires the container to the host and reports it in the requested version", func() {
			o := netOpts{ver: ver, dataDir: dataDir, routes: []string{"10.200.0.0/16"}}
			res := add(o, "c1", contNS)

			Expect(res.IPs).To(HaveLen(1))
			contIP := res.IPs[0].Address.IP.String()
			Expect(res.IPs[0].Address.String()).To(MatchRegexp(`^10\.1\.1\.\d+/24$`))
			Expect(res.IPs[0].Gateway.String()).To(Equal(gw4))
			Expect(res.Routes).To(HaveLen(1))
			Expect(res.Routes[0].Dst.String()).To(Equal("10.200.0.0/16"))
			Expect(res.DNS.Nameservers).To(Equal([]string{"10.1.1.53"}))
			hostVeth := ""
			if testutil.AtLeast(ver, "0.3.0") {
				Expect(res.Interfaces).To(HaveLen(2))
				hostVeth = res.Interfaces[0].Name
				Expect(res.Interfaces[0].Sandbox).To(BeEmpty())
				Expect(res.Interfaces[0].Mac).NotTo(BeEmpty())
				Expect(res.Interfaces[1].Name).To(Equal("eth0"))
				Expect(res.Interfaces[1].Sandbox).To(Equal(contNS.Path()))
				Expect(res.Interfaces[1].Mac).NotTo(BeEmpty())
				Expect(*res.IPs[0].Interface).To(Equal(1))
			} else {
				links := testutil.LinkNames(hostNS)
				Expect(links).To(HaveLen(2))
				hostVeth = links[1]
			}
			Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo", hostVeth))

			// Upstream's shape: the gateway as a /32 on the host end, a host
			// route to the container; in the container no route straight
			// onto the link except to the gateway.
			Expect(testutil.Addrs(hostNS, hostVeth)).To(ConsistOf(gw4 + "/32"))
			Expect(testutil.Routes(hostNS)).To(ContainElement(contIP + "/32 dev " + hostVeth + " scope link"))
			Expect(testutil.Addrs(contNS, "eth0")).To(ConsistOf(res.IPs[0].Address.String()))
			Expect(testutil.Routes(contNS)).To(ConsistOf(
				gw4+"/32 dev eth0 scope link src "+contIP,
				subnet4+" via "+gw4+" dev eth0 src "+contIP,
				"10.200.0.0/16 via "+gw4+" dev eth0",
			))
			Expect(testutil.Reservations(dataDir)).To(ConsistOf(netName + "/" + contIP))

			Expect(testutil.Ping(contNS, gw4)).To(Succeed())
		})

		It("survives ADD, CHECK, DEL, DEL and leaves nothing behind", func() {
			o := netOpts{ver: ver, dataDir: dataDir, ipMasq: true}
			before := takeSnapshot(hostNS, contNS, dataDir)
			res := add(o, "c1", contNS)
			if testutil.AtLeast(ver, "0.4.0") {
				testutil.MustRunIn(hostNS, ptpPlugin, call("CHECK", "c1", contNS, withPrev(o, res).json()))
			}
			testutil.MustRunIn(hostNS, ptpPlugin, call("DEL", "c1", contNS, o.json()))
			Expect(takeSnapshot(hostNS, contNS, dataDir)).To(Equal(before))
			testutil.MustRunIn(hostNS, ptpPlugin, call("DEL", "c1", contNS, o.json()))
			Expect(takeSnapshot(hostNS, contNS, dataDir)).To(Equal(before))
		})

		It("releases everything on DEL without a netns", func() {
			o := netOpts{ver: ver, dataDir: dataDir, ipMasq: true}
			before := takeSnapshot(hostNS, contNS, dataDir)
			add(o, "c1", contNS)
			Expect(testutil.Reservations(dataDir)).To(HaveLen(1))
			Expect(natRules(hostNS)).NotTo(BeEmpty())

			testutil.MustRunIn(hostNS, ptpPlugin, call("DEL", "c1", nil, o.json()))
			// The host end goes by name, and the container end with it.
			Expect(takeSnapshot(hostNS, contNS, dataDir)).To(Equal(before))
		})
	}, testutil.VersionEntries())

	It("DEL removes the pair, the masquerade rules and the reservation with a config that no longer validates", func() {
		// A config edited between ADD and DEL must not keep the attachment
		// from being removed; upstream's DEL succeeds too (issue 22).
		o := netOpts{ver: "1.1.0", dataDir: dataDir, ipMasq: true}
		before := takeSnapshot(hostNS, contNS, dataDir)
		add(o, "c1", contNS)
		edited := netOpts{ver: "1.1.0", dataDir: dataDir, ipMasq: true, backend: "pf", mtu: 5}
		out := testutil.RunIn(hostNS, ptpPlugin, call("ADD", "c2", contNS, edited.json()))
		testutil.ExpectCode(out, types.ErrInvalidNetworkConfig, "ADD still refuses it")
		testutil.MustRunIn(hostNS, ptpPlugin, call("DEL", "c1", contNS, edited.json()))
		Expect(takeSnapshot(hostNS, contNS, dataDir)).To(Equal(before))
		testutil.MustRunIn(hostNS, ptpPlugin, call("DEL", "c1", contNS, edited.json()))
	})

	It("routes two containers to each other through the host", func() {
		other := testutil.NewNS()
		o := netOpts{ver: "1.1.0", dataDir: dataDir, dual: true}
		a := add(o, "a", contNS)
		b := add(o, "b", other)
		Expect(a.IPs).To(HaveLen(2))
		Expect(b.IPs).To(HaveLen(2))
		for i := range a.IPs {
			Expect(testutil.Ping(contNS, b.IPs[i].Address.IP.String())).To(Succeed())
			Expect(testutil.Ping(other, a.IPs[i].Address.IP.String())).To(Succeed())
		}
		Expect(hostNS.Do(func() error {
			for _, s := range []string{"net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding"} {
				b, err := os.ReadFile("/proc/sys/" + s)
				if err != nil {
					return err
				}
				if string(b) != "1\n" {
					return fmt.Errorf("%s = %q", s, b)
				}
			}
			return nil
		})).To(Succeed())
		// Both host ends hold the same gateway addresses.
		Expect(testutil.Addrs(hostNS, a.Interfaces[0].Name)).To(ConsistOf(gw4+"/32", gw6+"/128"))
		Expect(testutil.Addrs(hostNS, b.Interfaces[0].Name)).To(ConsistOf(gw4+"/32", gw6+"/128"))

		// Removing one container leaves the other reachable.
		testutil.MustRunIn(hostNS, ptpPlugin, call("DEL", "a", contNS, o.json()))
		Expect(testutil.Ping(other, gw4)).To(Succeed())
		Expect(testutil.Ping(other, gw6)).To(Succeed())
	})

	It("announces the container's IPv4 address with a gratuitous ARP that reaches the host end", func() {
		l, err := testutil.ListenARP(hostNS, "")
		Expect(err).NotTo(HaveOccurred())
		defer l.Close()
		res := add(netOpts{ver: "1.1.0", dataDir: dataDir, dual: true}, "c1", contNS)
		mac, err := net.ParseMAC(res.Interfaces[1].Mac)
		Expect(err).NotTo(HaveOccurred())
		Expect(l.Announced(res.IPs[0].Address.IP.String(), 5*time.Second)).To(Equal(mac))
	})

	It("configures dual-stack without duplicate address detection", func() {
		o := netOpts{ver: "1.1.0", dataDir: dataDir, dual: true}
		res := add(o, "c1", contNS)
		Expect(res.IPs).To(HaveLen(2))
		v6 := res.IPs[1].Address
		Expect(v6.String()).To(MatchRegexp(`^fd00:1::[0-9a-f]+/64$`))
		Expect(res.IPs[1].Gateway.String()).To(Equal(gw6))

		// Usable as soon as ADD returns: not tentative, on either end.
		for _, end := range []struct {
			n    *ns.NetNS
			link string
			addr string
		}{{contNS, "eth0", v6.IP.String()}, {hostNS, res.Interfaces[0].Name, gw6}} {
			h := testutil.Handle(end.n)
			l, err := h.LinkByName(end.link)
			Expect(err).NotTo(HaveOccurred())
			addrs, err := h.AddrList(l, netlink.FAMILY_V6)
			Expect(err).NotTo(HaveOccurred())
			found := false
			for _, a := range addrs {
				if a.IP.String() == end.addr {
					found = true
					Expect(a.Flags&unix.IFA_F_TENTATIVE).To(BeZero(), "%s on %s is tentative", end.addr, end.link)
					Expect(a.Flags & unix.IFA_F_NODAD).NotTo(BeZero())
				}
			}
			Expect(found).To(BeTrue(), "%s not on %s", end.addr, end.link)
		}
		Expect(testutil.Routes(contNS)).To(ContainElements(
			gw6+"/128 dev eth0 src "+v6.IP.String(),
			subnet6+" via "+gw6+" dev eth0 src "+v6.IP.String(),
		))
		Expect(testutil.Routes(hostNS)).To(ContainElement(v6.IP.String() + "/128 dev " + res.Interfaces[0].Name))
		Expect(testutil.Ping(contNS, gw6)).To(Succeed())
		Expect(testutil.Ping(contNS, gw4)).To(Succeed())
		testutil.MustRunIn(hostNS, ptpPlugin, call("CHECK", "c1", contNS, withPrev(o, res).json()))
	})

	It("works with IPv6 only", func() {
		o := netOpts{ver: "1.0.0", dataDir: dataDir, v6only: true, ipMasq: true}
		res := add(o, "c1", contNS)
		Expect(res.IPs).To(HaveLen(1))
		Expect(res.IPs[0].Address.IP.To4()).To(BeNil())
		Expect(testutil.Ping(contNS, gw6)).To(Succeed())
		testutil.MustRunIn(hostNS, ptpPlugin, call("CHECK", "c1", contNS, withPrev(o, res).json()))
		testutil.MustRunIn(hostNS, ptpPlugin, call("DEL", "c1", contNS, o.json()))
		Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo"))
	})

	It("sets the MTU on both ends", func() {
		o := netOpts{ver: "1.1.0", dataDir: dataDir, mtu: 1400}
		res := add(o, "c1", contNS)
		for _, end := range []struct {
			n    *ns.NetNS
			name string
		}{{hostNS, res.Interfaces[0].Name}, {contNS, "eth0"}} {
			l, err := testutil.Handle(end.n).LinkByName(end.name)
			Expect(err).NotTo(HaveOccurred())
			Expect(l.Attrs().MTU).To(Equal(1400))
		}
	})

	It("ends ADD, DEL, ADD in the same state as one ADD", func() {
		o := netOpts{ver: "1.1.0", dataDir: dataDir, dual: true, oneIP: true, ipMasq: true}
		add(o, "c1", contNS)
		first := takeSnapshot(hostNS, contNS, dataDir)
		testutil.MustRunIn(hostNS, ptpPlugin, call("DEL", "c1", contNS, o.json()))
		add(o, "c1", contNS)
		Expect(takeSnapshot(hostNS, contNS, dataDir)).To(Equal(first))
	})

	DescribeTableSubtree("masquerade", func(backend string) {
		var outNS *ns.NetNS
		const outHost, outAddr = testutil.OutsideHostAddr, testutil.OutsideAddr

		BeforeEach(func() {
			// An outside network the host reaches directly and that has no
			// route back to the containers: only masquerade gets replies home.
			outNS = testutil.NewOutside(hostNS)
		})

		It("lets the container reach the outside as the host's address", func() {
			o := netOpts{ver: "1.1.0", dataDir: dataDir, ipMasq: true, backend: backend, routes: []string{"0.0.0.0/0"}}
			res := add(o, "c1", contNS)
			Expect(testutil.Routes(contNS)).To(ContainElement("default via " + gw4 + " dev eth0"))
			Expect(testutil.UDPSource(contNS, outNS, outAddr)).To(Equal(outHost))
			Expect(testutil.Ping(contNS, outAddr)).To(Succeed())

			owner := netfilter.Owner{Network: netName, ContainerID: "c1", IfName: "eth0"}
			addrs := []*net.IPNet{&res.IPs[0].Address}
			Expect(masqCheck(hostNS, backend, owner, addrs)).To(Succeed())
			testutil.MustRunIn(hostNS, ptpPlugin, call("CHECK", "c1", contNS, withPrev(o, res).json()))

			// DEL without a netns still removes the rules, whatever the
			// config now says about the backend.
			o2 := o
			o2.ipMasq, o2.backend = false, ""
			testutil.MustRunIn(hostNS, ptpPlugin, call("DEL", "c1", nil, o2.json()))
			Expect(errors.Is(masqCheck(hostNS, backend, owner, addrs), netfilter.ErrMissing)).To(BeTrue())
			Expect(natRules(hostNS)).To(BeEmpty())
		})

		It("keeps the container's address towards ipMasqExcludeCIDRs, and CHECK asks for them", func() {
			o := netOpts{ver: "1.1.0", dataDir: dataDir, ipMasq: true, backend: backend, routes: []string{"0.0.0.0/0"},
				extraKeys: `"ipMasqExcludeCIDRs": ["10.99.0.0/16"]`}
			res := add(o, "c1", contNS)
			Expect(testutil.UDPSource(contNS, outNS, outAddr)).To(Equal(res.IPs[0].Address.IP.String()),
				"the outside is excluded: it sees the container's own address")
			testutil.MustRunIn(hostNS, ptpPlugin, call("CHECK", "c1", contNS, withPrev(o, res).json()))
			other := o
			other.extraKeys = `"ipMasqExcludeCIDRs": ["10.98.0.0/16"]`
			out := testutil.RunIn(hostNS, ptpPlugin, call("CHECK", "c1", contNS, withPrev(other, res).json()))
			Expect(out.Err).NotTo(BeNil(), "CHECK of another exclusion finds it missing")
			Expect(out.Err.Error()).To(ContainSubstring("10.98.0.0/16"))
			testutil.MustRunIn(hostNS, ptpPlugin, call("DEL", "c1", contNS, o.json()))
			Expect(natRules(hostNS)).To(BeEmpty())
		})

		It("does not masquerade without ipMasq", func() {
			o := netOpts{ver: "1.1.0", dataDir: dataDir, backend: backend, routes: []string{"0.0.0.0/0"}}
			add(o, "c1", contNS)
			Expect(natRules(hostNS)).To(BeEmpty())
		})
	}, Entry("iptables", netfilter.BackendIPTables), Entry("nftables", netfilter.BackendNFTables))

	DescribeTableSubtree("a failure midway through ADD", func(backend string) {
		for _, step := range ptp.AddSteps {
			It("leaves nothing behind after "+step, func() {
				o := netOpts{ver: "1.1.0", dataDir: dataDir, dual: true, ipMasq: true, backend: backend, routes: []string{"0.0.0.0/0"}}
				before := takeSnapshot(hostNS, contNS, dataDir)
				out := testutil.RunIn(hostNS, ptp.New(attach.Hooks{AfterStep: testutil.FailAfter(step, nil)}), call("ADD", "c1", contNS, o.json()))
				Expect(out.Err).NotTo(BeNil())
				Expect(out.Err.Msg).To(ContainSubstring("injected failure"))
				Expect(takeSnapshot(hostNS, contNS, dataDir)).To(Equal(before))

				// And the same ADD then succeeds.
				add(o, "c1", contNS)
			})

			It("leaves nothing behind after a panic after "+step, func() {
				o := netOpts{ver: "1.1.0", dataDir: dataDir, dual: true, ipMasq: true, backend: backend, routes: []string{"0.0.0.0/0"}}
				before := takeSnapshot(hostNS, contNS, dataDir)
				out := testutil.RunIn(hostNS, ptp.New(attach.Hooks{AfterStep: testutil.PanicAfter(step)}), call("ADD", "c1", contNS, o.json()))
				testutil.ExpectCode(out, types.ErrInternal)
				Expect(out.Err.Msg).To(ContainSubstring("injected panic"))
				Expect(takeSnapshot(hostNS, contNS, dataDir)).To(Equal(before))
			})
		}
	}, Entry("iptables", netfilter.BackendIPTables), Entry("nftables", netfilter.BackendNFTables))

	It("undoes everything when the container already has the interface", func() {
		h := testutil.Handle(contNS)
		la := netlink.NewLinkAttrs()
		la.Name = "eth0"
		Expect(h.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "peer0"})).To(Succeed())
		o := netOpts{ver: "1.1.0", dataDir: dataDir, ipMasq: true}
		before := takeSnapshot(hostNS, contNS, dataDir)
		out := testutil.RunIn(hostNS, ptpPlugin, call("ADD", "c1", contNS, o.json()))
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Msg).To(ContainSubstring("eth0"))
		Expect(takeSnapshot(hostNS, contNS, dataDir)).To(Equal(before))
	})

	Describe("DEL with the netns gone", func() {
		It("succeeds when the namespace was destroyed", func() {
			gone, cleanup := testutil.NewRemovableNS()
			o := netOpts{ver: "1.1.0", dataDir: dataDir, ipMasq: true}
			before := takeSnapshot(hostNS, contNS, dataDir)
			add(o, "c1", gone)
			cleanup()

			c := call("DEL", "c1", gone, o.json())
			testutil.MustRunIn(hostNS, ptpPlugin, c)
			testutil.MustRunIn(hostNS, ptpPlugin, c)
			// The namespace's teardown runs in a kernel worker; the host
			// end disappears with it or with our DEL, whichever is first.
			Eventually(func() []string { return testutil.LinkNames(hostNS) }).Should(Equal(before.HostLinks))
			Expect(takeSnapshot(hostNS, contNS, dataDir)).To(Equal(before))
		})

		It("removes a pair the unmounted namespace kept alive", func() {
			gone, cleanup := testutil.NewRemovableNS()
			held, err := ns.Open(gone.Path()) // a stray reference
			Expect(err).NotTo(HaveOccurred())
			defer held.Close()
			o := netOpts{ver: "1.1.0", dataDir: dataDir}
			res := add(o, "c1", gone)
			cleanup()
			Expect(testutil.LinkNames(hostNS)).To(ContainElement(res.Interfaces[0].Name))

			testutil.MustRunIn(hostNS, ptpPlugin, call("DEL", "c1", gone, o.json()))
			Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo"))
			Expect(testutil.LinkNames(held)).To(ConsistOf("lo"))
			Expect(testutil.Reservations(dataDir)).To(BeEmpty())
		})
	})

	Describe("DEL deletes only what it owns", func() {
		It("treats a netns path that is no longer a namespace as gone", func() {
			gone, cleanup := testutil.NewRemovableNS()
			held, err := ns.Open(gone.Path()) // keeps the pair alive
			Expect(err).NotTo(HaveOccurred())
			defer held.Close()
			o := netOpts{ver: "1.1.0", dataDir: dataDir, ipMasq: true}
			res := add(o, "c1", gone)
			cleanup()
			// The runtime unmounted the namespace but left its file.
			Expect(os.WriteFile(gone.Path(), nil, 0o444)).To(Succeed())
			DeferCleanup(os.Remove, gone.Path())

			c := call("DEL", "c1", gone, o.json())
			testutil.MustRunIn(hostNS, ptpPlugin, c)
			Expect(testutil.LinkNames(hostNS)).NotTo(ContainElement(res.Interfaces[0].Name))
			Expect(testutil.LinkNames(held)).To(ConsistOf("lo"))
			Expect(testutil.Reservations(dataDir)).To(BeEmpty())
			Expect(natRules(hostNS)).To(BeEmpty())
			testutil.MustRunIn(hostNS, ptpPlugin, c)
		})

		It("leaves a host link that got the attachment's hashed name later alone", func() {
			o := netOpts{ver: "1.1.0", dataDir: dataDir}
			res := add(o, "a", contNS)
			name := res.Interfaces[0].Name
			testutil.MustRunIn(hostNS, ptpPlugin, call("DEL", "a", contNS, o.json()))
			// Another attachment's host end, named like a's by a hash
			// collision, tagged as its own.
			h := testutil.Handle(hostNS)
			la := netlink.NewLinkAttrs()
			la.Name = name
			Expect(h.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "peerb"})).To(Succeed())
			l, err := h.LinkByName(name)
			Expect(err).NotTo(HaveOccurred())
			Expect(h.LinkSetAlias(l, "cni:b:eth0")).To(Succeed())
			testutil.MustRunIn(hostNS, ptpPlugin, call("DEL", "a", nil, o.json()))
			Expect(testutil.LinkNames(hostNS)).To(ContainElements(name, "peerb"))
		})

		It("leaves another plugin's interface of the same name alone", func() {
			h := testutil.Handle(contNS)
			la := netlink.NewLinkAttrs()
			la.Name = "eth0"
			Expect(h.LinkAdd(&netlink.Bridge{LinkAttrs: la})).To(Succeed()) // not a veth: another plugin's
			o := netOpts{ver: "1.1.0", dataDir: dataDir}
			Expect(testutil.RunIn(hostNS, ptpPlugin, call("ADD", "c1", contNS, o.json())).Err).NotTo(BeNil())
			// The runtime cleans up after the failed ADD.
			testutil.MustRunIn(hostNS, ptpPlugin, call("DEL", "c1", contNS, o.json()))
			Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo", "eth0"))
		})

		It("tags both ends with the attachment's alias", func() {
			o := netOpts{ver: "1.1.0", dataDir: dataDir}
			res := add(o, "c1", contNS)
			for n, name := range map[*ns.NetNS]string{hostNS: res.Interfaces[0].Name, contNS: "eth0"} {
				l, err := testutil.Handle(n).LinkByName(name)
				Expect(err).NotTo(HaveOccurred())
				Expect(l.Attrs().Alias).To(Equal("cni:c1:eth0"), name)
			}
		})
	})

	DescribeTable("CHECK catches",
		func(breakIt func(res *current.Result), errHas string) {
			o := netOpts{ver: "1.1.0", dataDir: dataDir, dual: true, ipMasq: true, routes: []string{"10.200.0.0/16"}}
			res := add(o, "c1", contNS)
			checkCall := call("CHECK", "c1", contNS, withPrev(o, res).json())
			testutil.MustRunIn(hostNS, ptpPlugin, checkCall)
			breakIt(res)
			out := testutil.RunIn(hostNS, ptpPlugin, checkCall)
			Expect(out.Err).NotTo(BeNil())
			Expect(out.Err.Msg).To(ContainSubstring(errHas))
		},
		Entry("a deleted container address", func(res *current.Result) {
			h := testutil.Handle(contNS)
			l, err := h.LinkByName("eth0")
			Expect(err).NotTo(HaveOccurred())
			Expect(h.AddrDel(l, &netlink.Addr{IPNet: &res.IPs[1].Address})).To(Succeed())
		}, "lacks address fd00:1::"),
		Entry("a deleted container route", func(res *current.Result) {
			h := testutil.Handle(contNS)
			l, err := h.LinkByName("eth0")
			Expect(err).NotTo(HaveOccurred())
			_, dst, _ := net.ParseCIDR("10.200.0.0/16")
			Expect(h.RouteDel(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: dst})).To(Succeed())
		}, "lacks route 10.200.0.0/16"),
		Entry("a deleted subnet route", func(res *current.Result) {
			h := testutil.Handle(contNS)
			l, err := h.LinkByName("eth0")
			Expect(err).NotTo(HaveOccurred())
			_, dst, _ := net.ParseCIDR(subnet4)
			Expect(h.RouteDel(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: dst})).To(Succeed())
		}, "lacks route "+subnet4),
		Entry("a deleted veth", func(res *current.Result) {
			h := testutil.Handle(hostNS)
			l, err := h.LinkByName(res.Interfaces[0].Name)
			Expect(err).NotTo(HaveOccurred())
			Expect(h.LinkDel(l)).To(Succeed())
		}, `"eth0"`),
		Entry("a deleted host route", func(res *current.Result) {
			h := testutil.Handle(hostNS)
			l, err := h.LinkByName(res.Interfaces[0].Name)
			Expect(err).NotTo(HaveOccurred())
			dst := &net.IPNet{IP: res.IPs[0].Address.IP, Mask: net.CIDRMask(32, 32)}
			Expect(h.RouteDel(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: dst, Scope: netlink.SCOPE_LINK})).To(Succeed())
		}, "lacks route "+"10.1.1."),
		Entry("a deleted gateway address on the host end", func(res *current.Result) {
			h := testutil.Handle(hostNS)
			l, err := h.LinkByName(res.Interfaces[0].Name)
			Expect(err).NotTo(HaveOccurred())
			Expect(h.AddrDel(l, &netlink.Addr{IPNet: testutil.MustCIDR(gw6 + "/128")})).To(Succeed())
		}, "lacks address "+gw6+"/128"),
		Entry("a container end that is down", func(res *current.Result) {
			h := testutil.Handle(contNS)
			l, err := h.LinkByName("eth0")
			Expect(err).NotTo(HaveOccurred())
			Expect(h.LinkSetDown(l)).To(Succeed())
		}, `"eth0" is down`),
		Entry("a changed container MAC", func(res *current.Result) {
			h := testutil.Handle(contNS)
			l, err := h.LinkByName("eth0")
			Expect(err).NotTo(HaveOccurred())
			Expect(h.LinkSetHardwareAddr(l, net.HardwareAddr{0x02, 0xde, 0xad, 0, 0, 9})).To(Succeed())
		}, `"eth0" in `+"/run/netns/"),
		Entry("a host end that is not the one ADD reported", func(res *current.Result) {
			h := testutil.Handle(hostNS)
			l, err := h.LinkByName(res.Interfaces[0].Name)
			Expect(err).NotTo(HaveOccurred())
			Expect(h.LinkSetDown(l)).To(Succeed())
			Expect(h.LinkSetName(l, "renamed0")).To(Succeed())
			Expect(h.LinkSetUp(l)).To(Succeed())
		}, `is "renamed0", prevResult says`),
		Entry("removed masquerade rules", func(res *current.Result) {
			Expect(hostNS.Do(func() error {
				return masq.TeardownMasqAll(netfilter.Owner{Network: netName, ContainerID: "c1", IfName: "eth0"})
			})).To(Succeed())
		}, "masquerade"),
	)

	It("cleans up on DEL whatever prevResult holds: it never parses it", func() {
		o := netOpts{ver: "1.1.0", dataDir: dataDir, dual: true, ipMasq: true}
		before := takeSnapshot(hostNS, contNS, dataDir)
		add(o, "c1", contNS)
		bad := o
		bad.prevRes = []byte(`{"cniVersion": "9.9.9"}`)
		testutil.MustRunIn(hostNS, ptpPlugin, call("DEL", "c1", contNS, bad.json()))
		Expect(takeSnapshot(hostNS, contNS, dataDir)).To(Equal(before))
	})

	It("removes an upstream-made pair, untagged, whose host end has a random name", func() {
		h := testutil.Handle(hostNS)
		la := netlink.NewLinkAttrs()
		la.Name = "veth5a1b2c3d" // not the name ptp derives: upstream picks one at random
		Expect(h.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(contNS.Fd()))})).To(Succeed())
		o := netOpts{ver: "1.1.0", dataDir: dataDir}
		testutil.MustRunIn(hostNS, ptpPlugin, call("DEL", "c1", contNS, o.json()))
		Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo"))
		Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo"))
	})

	It("refuses its own namespace as CNI_NETNS with code 8 before any change", func() {
		o := netOpts{ver: "1.1.0", dataDir: dataDir, ipMasq: true}
		before := takeSnapshot(hostNS, contNS, dataDir)
		out := testutil.RunIn(hostNS, ptpPlugin, call("ADD", "c1", hostNS, o.json()))
		testutil.ExpectCode(out, types.ErrInvalidNetNS)
		Expect(out.Err.Msg).To(ContainSubstring(hostNS.Path()))
		Expect(takeSnapshot(hostNS, contNS, dataDir)).To(Equal(before))
		var e types.Error
		Expect(json.Unmarshal(out.Stdout, &e)).To(Succeed(), "one JSON document on stdout: %s", out.Stdout)
	})

	It("runs GC and STATUS as the built binary with only CNI_COMMAND and CNI_PATH set", func() {
		o := netOpts{ver: "1.1.0", dataDir: dataDir, ipMasq: true, extraKeys: `"cni.dev/valid-attachments": []`}
		for _, cmd := range []string{"GC", "STATUS"} {
			out := testutil.ExecIn(hostNS, "ptp", testutil.Call{Command: cmd, Stdin: o.json()})
			Expect(out.Err).To(BeNil(), "%s: stderr %s", cmd, out.Stderr)
		}
	})

	Describe("IPAM results and failures it cannot use", func() {
		fakeIPAM := func(body string) string {
			GinkgoHelper()
			dir := GinkgoT().TempDir()
			Expect(os.WriteFile(dir+"/fake-ipam", []byte("#!/bin/sh\n"+body+"\n"), 0o755)).To(Succeed())
			return dir
		}
		fakeConf := []byte(`{"cniVersion": "1.1.0", "name": "ptp-net", "type": "ptp", "ipam": {"type": "fake-ipam"}}`)
		addWith := func(path string) testutil.Output {
			GinkgoHelper()
			c := call("ADD", "c1", contNS, fakeConf)
			c.Path = path
			return testutil.RunIn(hostNS, ptpPlugin, c)
		}
		result := func(ip, gw string) string {
			g := ""
			if gw != "" {
				g = `, "gateway": "` + gw + `"`
			}
			return `[ "$CNI_COMMAND" = ADD ] && echo '{"cniVersion": "1.1.0", "ips": [{"address": "` + ip + `"` + g + `}]}'; exit 0`
		}
		DescribeTable("are config errors (code 7) naming the key, and leave nothing",
			func(body, errHas string) {
				out := addWith(fakeIPAM(body))
				testutil.ExpectCode(out, types.ErrInvalidNetworkConfig)
				Expect(out.Err.Msg).To(ContainSubstring(errHas))
				Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo"))
				Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo"))
			},
			Entry("an address without a gateway", result("10.1.1.2/24", ""), "ipam: fake-ipam returned 10.1.1.2/24 without a gateway"),
			Entry("an address that is its own gateway", result("10.1.1.2/24", "10.1.1.2"), "with itself as gateway"),
		)
		It("refuses an ipam.type missing from CNI_PATH with code 7", func() {
			out := addWith(GinkgoT().TempDir())
			testutil.ExpectCode(out, types.ErrInvalidNetworkConfig)
			Expect(out.Err.Msg).To(ContainSubstring(`ipam.type: "fake-ipam" not found`))
		})
		It("answers 999 with the delegate's stderr when IPAM fails with only stderr", func() {
			out := addWith(fakeIPAM(`echo "pool on fire" >&2; exit 1`))
			testutil.ExpectCode(out, types.ErrInternal)
			Expect(out.Err.Msg).To(ContainSubstring("pool on fire"))
		})
		It("releases the reservation of a result with an incomplete entry", func() {
			released := GinkgoT().TempDir() + "/released"
			out := addWith(fakeIPAM(`[ "$CNI_COMMAND" = DEL ] && touch ` + released + `; echo '{"cniVersion": "1.1.0", "ips": [{"gateway": "10.1.1.1"}]}'`))
			Expect(out.Err).NotTo(BeNil())
			Expect(out.Err.Msg).To(ContainSubstring("ips[0].address: missing"))
			Expect(released).To(BeAnExistingFile())
			Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo"))
		})
	})

	It("refuses CHECK without prevResult", func() {
		o := netOpts{ver: "1.1.0", dataDir: dataDir}
		add(o, "c1", contNS)
		out := testutil.RunIn(hostNS, ptpPlugin, call("CHECK", "c1", contNS, o.json()))
		testutil.ExpectCode(out, types.ErrInvalidNetworkConfig)
		Expect(out.Err.Msg).To(ContainSubstring("prevResult"))
	})

	It("collects what GC's valid attachments no longer list, and forwards STATUS", func() {
		other := testutil.NewNS()
		o := netOpts{ver: "1.1.0", dataDir: dataDir, ipMasq: true}
		a := add(o, "a", contNS)
		b := add(o, "b", other)
		Expect(testutil.Reservations(dataDir)).To(HaveLen(2))

		testutil.MustRunIn(hostNS, ptpPlugin, testutil.Call{Command: "STATUS", Stdin: o.json()})

		gc := o
		gc.extraKeys = `"cni.dev/valid-attachments": [{"containerID": "b", "ifname": "eth0"}]`
		testutil.MustRunIn(hostNS, ptpPlugin, testutil.Call{Command: "GC", Stdin: gc.json()})
		Expect(testutil.Reservations(dataDir)).To(ConsistOf(netName + "/" + b.IPs[0].Address.IP.String()))
		ownerA := netfilter.Owner{Network: netName, ContainerID: "a", IfName: "eth0"}
		ownerB := netfilter.Owner{Network: netName, ContainerID: "b", IfName: "eth0"}
		Expect(errors.Is(masqCheck(hostNS, "", ownerA, []*net.IPNet{&a.IPs[0].Address}), netfilter.ErrMissing)).To(BeTrue())
		Expect(masqCheck(hostNS, "", ownerB, []*net.IPNet{&b.IPs[0].Address})).To(Succeed())
	})

	Describe("bad input", func() {
		expectNothingMade := func() {
			GinkgoHelper()
			Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo"))
			Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo"))
			Expect(testutil.Reservations(dataDir)).To(BeEmpty())
		}
		testutil.RefusalSpecs(func(c testutil.Call) testutil.Output { return testutil.RunIn(hostNS, ptpPlugin, c) },
			func(ver string) testutil.Call {
				return call("ADD", "c1", contNS, netOpts{ver: ver, dataDir: dataDir}.json())
			},
			expectNothingMade)
		DescribeTable("rejects invalid values with code 7 naming the key",
			func(stdin, key string) {
				out := testutil.RunIn(hostNS, ptpPlugin, call("ADD", "c1", contNS, []byte(stdin)))
				testutil.ExpectCode(out, types.ErrInvalidNetworkConfig)
				Expect(out.Err.Msg).To(ContainSubstring(key))
				expectNothingMade()
			},
			Entry("ipam missing", `{"cniVersion": "1.1.0", "name": "n", "type": "ptp"}`, "ipam: missing"),
			Entry("ipam.type missing", `{"cniVersion": "1.1.0", "name": "n", "type": "ptp", "ipam": {}}`, "ipam.type"),
			Entry("mtu", `{"cniVersion": "1.1.0", "name": "n", "type": "ptp", "mtu": 12, "ipam": {"type": "host-local"}}`, "mtu: 12"),
			Entry("ipMasqBackend", `{"cniVersion": "1.1.0", "name": "n", "type": "ptp", "ipMasqBackend": "ipfw", "ipam": {"type": "host-local"}}`, `ipMasqBackend: "ipfw"`),
		)
		It("rejects a path that is not a netns with code 8", func() {
			o := netOpts{ver: "1.1.0", dataDir: dataDir}
			c := call("ADD", "c1", contNS, o.json())
			c.Netns = "/proc/self/status"
			out := testutil.RunIn(hostNS, ptpPlugin, c)
			testutil.ExpectCode(out, types.ErrInvalidNetNS)
			Expect(out.Err.Msg).To(ContainSubstring("/proc/self/status"))
			expectNothingMade()
		})
		It("passes an IPAM failure through and makes nothing", func() {
			stdin := []byte(`{"cniVersion": "1.1.0", "name": "n", "type": "ptp", "ipam": {"type": "host-local", "dataDir": "` +
				dataDir + `", "ranges": [[{"subnet": "10.1.1.0/33"}]]}}`)
			out := testutil.RunIn(hostNS, ptpPlugin, call("ADD", "c1", contNS, stdin))
			Expect(out.Err).NotTo(BeNil())
			Expect(out.Err.Msg).To(ContainSubstring("10.1.1.0/33"))
			expectNothingMade()
		})
	})

	It("works as the built binary", func() {
		o := netOpts{ver: "1.1.0", dataDir: dataDir, dual: true}
		out := testutil.ExecIn(hostNS, "ptp", call("ADD", "c1", contNS, o.json()))
		Expect(out.Err).To(BeNil(), "stderr: %s", out.Stderr)
		res := testutil.ParseResult("1.1.0", out.Stdout)
		Expect(testutil.Ping(contNS, gw6)).To(Succeed())
		out = testutil.ExecIn(hostNS, "ptp", call("DEL", "c1", contNS, o.json()))
		Expect(out.Err).To(BeNil(), "stderr: %s", out.Stderr)
		Expect(testutil.LinkNames(hostNS)).NotTo(ContainElement(res.Interfaces[0].Name))
	})
})

// masqCheck runs the backend's Check inside n.
func masqCheck(n *ns.NetNS, backend string, o netfilter.Owner, addrs []*net.IPNet) error {
	GinkgoHelper()
	return n.Do(func() error {
		if backend == "" {
			var errs []error
			for _, b := range []string{netfilter.BackendIPTables, netfilter.BackendNFTables} {
				m, err := masq.NewMasq(b)
				if err != nil {
					return err
				}
				err = m.Check(o, addrs)
				if err == nil {
					return nil
				}
				errs = append(errs, err)
			}
			return errors.Join(errs...)
		}
		m, err := masq.NewMasq(backend)
		if err != nil {
			return err
		}
		return m.Check(o, addrs)
	})
}
