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
	env := testutil.UseAttachEnv(ptpPlugin, "eth0")

	DescribeTableSubtree("every spec version", func(ver string) {
		It("wires the container to the host and reports it in the requested version", func() {
			o := netOpts{ver: ver, dataDir: env.DataDir, routes: []string{"10.200.0.0/16"}}
			res := env.Add(o.ver, "c1", env.ContNS, o.json())

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
				Expect(res.Interfaces[1].Sandbox).To(Equal(env.ContNS.Path()))
				Expect(res.Interfaces[1].Mac).NotTo(BeEmpty())
				Expect(*res.IPs[0].Interface).To(Equal(1))
			} else {
				links := testutil.LinkNames(env.HostNS)
				Expect(links).To(HaveLen(2))
				hostVeth = links[1]
			}
			Expect(testutil.LinkNames(env.HostNS)).To(ConsistOf("lo", hostVeth))

			// Upstream's shape: the gateway as a /32 on the host end, a host
			// route to the container; in the container no route straight
			// onto the link except to the gateway.
			Expect(testutil.Addrs(env.HostNS, hostVeth)).To(ConsistOf(gw4 + "/32"))
			Expect(testutil.Routes(env.HostNS)).To(ContainElement(contIP + "/32 dev " + hostVeth + " scope link"))
			Expect(testutil.Addrs(env.ContNS, "eth0")).To(ConsistOf(res.IPs[0].Address.String()))
			Expect(testutil.Routes(env.ContNS)).To(ConsistOf(
				gw4+"/32 dev eth0 scope link src "+contIP,
				subnet4+" via "+gw4+" dev eth0 src "+contIP,
				"10.200.0.0/16 via "+gw4+" dev eth0",
			))
			Expect(testutil.Reservations(env.DataDir)).To(ConsistOf(netName + "/" + contIP))

			Expect(testutil.Ping(env.ContNS, gw4)).To(Succeed())
		})

		It("survives ADD, CHECK, DEL, DEL and leaves nothing behind", func() {
			o := netOpts{ver: ver, dataDir: env.DataDir, ipMasq: true}
			before := takeSnapshot(env.HostNS, env.ContNS, env.DataDir)
			res := env.Add(o.ver, "c1", env.ContNS, o.json())
			if testutil.AtLeast(ver, "0.4.0") {
				env.Must("CHECK", "c1", env.ContNS, o.withPrev(res).json())
			}
			env.Must("DEL", "c1", env.ContNS, o.json())
			Expect(takeSnapshot(env.HostNS, env.ContNS, env.DataDir)).To(Equal(before))
			env.Must("DEL", "c1", env.ContNS, o.json())
			Expect(takeSnapshot(env.HostNS, env.ContNS, env.DataDir)).To(Equal(before))
		})

		It("releases everything on DEL without a netns", func() {
			o := netOpts{ver: ver, dataDir: env.DataDir, ipMasq: true}
			before := takeSnapshot(env.HostNS, env.ContNS, env.DataDir)
			env.Add(o.ver, "c1", env.ContNS, o.json())
			Expect(testutil.Reservations(env.DataDir)).To(HaveLen(1))
			Expect(natRules(env.HostNS)).NotTo(BeEmpty())

			env.Must("DEL", "c1", nil, o.json())
			// The host end goes by name, and the container end with it.
			Expect(takeSnapshot(env.HostNS, env.ContNS, env.DataDir)).To(Equal(before))
		})
	}, testutil.VersionEntries())

	It("DEL removes the pair, the masquerade rules and the reservation with a config that no longer validates", func() {
		// A config edited between ADD and DEL must not keep the attachment
		// from being removed; upstream's DEL succeeds too (issue 22).
		o := netOpts{ver: "1.1.0", dataDir: env.DataDir, ipMasq: true}
		before := takeSnapshot(env.HostNS, env.ContNS, env.DataDir)
		env.Add(o.ver, "c1", env.ContNS, o.json())
		edited := netOpts{ver: "1.1.0", dataDir: env.DataDir, ipMasq: true, backend: "pf", mtu: 5}
		out := env.Run("ADD", "c2", env.ContNS, edited.json())
		testutil.ExpectCode(out, types.ErrInvalidNetworkConfig, "ADD still refuses it")
		env.Must("DEL", "c1", env.ContNS, edited.json())
		Expect(takeSnapshot(env.HostNS, env.ContNS, env.DataDir)).To(Equal(before))
		env.Must("DEL", "c1", env.ContNS, edited.json())
	})

	It("routes two containers to each other through the host", func() {
		other := testutil.NewNS()
		o := netOpts{ver: "1.1.0", dataDir: env.DataDir, dual: true}
		a := env.Add(o.ver, "a", env.ContNS, o.json())
		b := env.Add(o.ver, "b", other, o.json())
		Expect(a.IPs).To(HaveLen(2))
		Expect(b.IPs).To(HaveLen(2))
		for i := range a.IPs {
			Expect(testutil.Ping(env.ContNS, b.IPs[i].Address.IP.String())).To(Succeed())
			Expect(testutil.Ping(other, a.IPs[i].Address.IP.String())).To(Succeed())
		}
		Expect(env.HostNS.Do(func() error {
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
		Expect(testutil.Addrs(env.HostNS, a.Interfaces[0].Name)).To(ConsistOf(gw4+"/32", gw6+"/128"))
		Expect(testutil.Addrs(env.HostNS, b.Interfaces[0].Name)).To(ConsistOf(gw4+"/32", gw6+"/128"))

		// Removing one container leaves the other reachable.
		env.Must("DEL", "a", env.ContNS, o.json())
		Expect(testutil.Ping(other, gw4)).To(Succeed())
		Expect(testutil.Ping(other, gw6)).To(Succeed())
	})

	It("announces the container's IPv4 address with a gratuitous ARP that reaches the host end", func() {
		l, err := testutil.ListenARP(env.HostNS, "")
		Expect(err).NotTo(HaveOccurred())
		defer l.Close()
		res := env.Add("1.1.0", "c1", env.ContNS, netOpts{ver: "1.1.0", dataDir: env.DataDir, dual: true}.json())
		mac, err := net.ParseMAC(res.Interfaces[1].Mac)
		Expect(err).NotTo(HaveOccurred())
		Expect(l.Announced(res.IPs[0].Address.IP.String(), 5*time.Second)).To(Equal(mac))
	})

	It("configures dual-stack without duplicate address detection", func() {
		o := netOpts{ver: "1.1.0", dataDir: env.DataDir, dual: true}
		res := env.Add(o.ver, "c1", env.ContNS, o.json())
		Expect(res.IPs).To(HaveLen(2))
		v6 := res.IPs[1].Address
		Expect(v6.String()).To(MatchRegexp(`^fd00:1::[0-9a-f]+/64$`))
		Expect(res.IPs[1].Gateway.String()).To(Equal(gw6))

		// Usable as soon as ADD returns: not tentative, on either end.
		for _, end := range []struct {
			n    *ns.NetNS
			link string
			addr string
		}{{env.ContNS, "eth0", v6.IP.String()}, {env.HostNS, res.Interfaces[0].Name, gw6}} {
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
		Expect(testutil.Routes(env.ContNS)).To(ContainElements(
			gw6+"/128 dev eth0 src "+v6.IP.String(),
			subnet6+" via "+gw6+" dev eth0 src "+v6.IP.String(),
		))
		Expect(testutil.Routes(env.HostNS)).To(ContainElement(v6.IP.String() + "/128 dev " + res.Interfaces[0].Name))
		Expect(testutil.Ping(env.ContNS, gw6)).To(Succeed())
		Expect(testutil.Ping(env.ContNS, gw4)).To(Succeed())
		env.Must("CHECK", "c1", env.ContNS, o.withPrev(res).json())
	})

	It("works with IPv6 only", func() {
		o := netOpts{ver: "1.0.0", dataDir: env.DataDir, v6only: true, ipMasq: true}
		res := env.Add(o.ver, "c1", env.ContNS, o.json())
		Expect(res.IPs).To(HaveLen(1))
		Expect(res.IPs[0].Address.IP.To4()).To(BeNil())
		Expect(testutil.Ping(env.ContNS, gw6)).To(Succeed())
		env.Must("CHECK", "c1", env.ContNS, o.withPrev(res).json())
		env.Must("DEL", "c1", env.ContNS, o.json())
		Expect(testutil.LinkNames(env.HostNS)).To(ConsistOf("lo"))
	})

	It("sets the MTU on both ends", func() {
		o := netOpts{ver: "1.1.0", dataDir: env.DataDir, mtu: 1400}
		res := env.Add(o.ver, "c1", env.ContNS, o.json())
		for _, end := range []struct {
			n    *ns.NetNS
			name string
		}{{env.HostNS, res.Interfaces[0].Name}, {env.ContNS, "eth0"}} {
			l, err := testutil.Handle(end.n).LinkByName(end.name)
			Expect(err).NotTo(HaveOccurred())
			Expect(l.Attrs().MTU).To(Equal(1400))
		}
	})

	It("ends ADD, DEL, ADD in the same state as one ADD", func() {
		o := netOpts{ver: "1.1.0", dataDir: env.DataDir, dual: true, oneIP: true, ipMasq: true}
		env.Add(o.ver, "c1", env.ContNS, o.json())
		first := takeSnapshot(env.HostNS, env.ContNS, env.DataDir)
		env.Must("DEL", "c1", env.ContNS, o.json())
		env.Add(o.ver, "c1", env.ContNS, o.json())
		Expect(takeSnapshot(env.HostNS, env.ContNS, env.DataDir)).To(Equal(first))
	})

	DescribeTableSubtree("masquerade", func(backend string) {
		var outNS *ns.NetNS
		const outHost, outAddr = testutil.OutsideHostAddr, testutil.OutsideAddr

		BeforeEach(func() {
			// An outside network the host reaches directly and that has no
			// route back to the containers: only masquerade gets replies home.
			outNS = testutil.NewOutside(env.HostNS)
		})

		It("lets the container reach the outside as the host's address", func() {
			o := netOpts{ver: "1.1.0", dataDir: env.DataDir, ipMasq: true, backend: backend, routes: []string{"0.0.0.0/0"}}
			res := env.Add(o.ver, "c1", env.ContNS, o.json())
			Expect(testutil.Routes(env.ContNS)).To(ContainElement("default via " + gw4 + " dev eth0"))
			Expect(testutil.UDPSource(env.ContNS, outNS, outAddr)).To(Equal(outHost))
			Expect(testutil.Ping(env.ContNS, outAddr)).To(Succeed())

			owner := netfilter.Owner{Network: netName, ContainerID: "c1", IfName: "eth0"}
			addrs := []*net.IPNet{&res.IPs[0].Address}
			Expect(masqCheck(env.HostNS, backend, owner, addrs)).To(Succeed())
			env.Must("CHECK", "c1", env.ContNS, o.withPrev(res).json())

			// DEL without a netns still removes the rules, whatever the
			// config now says about the backend.
			o2 := o
			o2.ipMasq, o2.backend = false, ""
			env.Must("DEL", "c1", nil, o2.json())
			Expect(errors.Is(masqCheck(env.HostNS, backend, owner, addrs), netfilter.ErrMissing)).To(BeTrue())
			Expect(natRules(env.HostNS)).To(BeEmpty())
		})

		It("keeps the container's address towards ipMasqExcludeCIDRs, and CHECK asks for them", func() {
			o := netOpts{ver: "1.1.0", dataDir: env.DataDir, ipMasq: true, backend: backend, routes: []string{"0.0.0.0/0"},
				extraKeys: `"ipMasqExcludeCIDRs": ["10.99.0.0/16"]`}
			res := env.Add(o.ver, "c1", env.ContNS, o.json())
			Expect(testutil.UDPSource(env.ContNS, outNS, outAddr)).To(Equal(res.IPs[0].Address.IP.String()),
				"the outside is excluded: it sees the container's own address")
			env.Must("CHECK", "c1", env.ContNS, o.withPrev(res).json())
			other := o
			other.extraKeys = `"ipMasqExcludeCIDRs": ["10.98.0.0/16"]`
			out := env.Run("CHECK", "c1", env.ContNS, other.withPrev(res).json())
			Expect(out.Err).NotTo(BeNil(), "CHECK of another exclusion finds it missing")
			Expect(out.Err.Error()).To(ContainSubstring("10.98.0.0/16"))
			env.Must("DEL", "c1", env.ContNS, o.json())
			Expect(natRules(env.HostNS)).To(BeEmpty())
		})

		It("does not masquerade without ipMasq", func() {
			o := netOpts{ver: "1.1.0", dataDir: env.DataDir, backend: backend, routes: []string{"0.0.0.0/0"}}
			env.Add(o.ver, "c1", env.ContNS, o.json())
			Expect(natRules(env.HostNS)).To(BeEmpty())
		})
	}, Entry("iptables", netfilter.BackendIPTables), Entry("nftables", netfilter.BackendNFTables))

	DescribeTableSubtree("a failure midway through ADD", func(backend string) {
		for _, step := range ptp.AddSteps {
			It("leaves nothing behind after "+step, func() {
				o := netOpts{ver: "1.1.0", dataDir: env.DataDir, dual: true, ipMasq: true, backend: backend, routes: []string{"0.0.0.0/0"}}
				before := takeSnapshot(env.HostNS, env.ContNS, env.DataDir)
				out := testutil.RunIn(env.HostNS, ptp.New(attach.Hooks{AfterStep: testutil.FailAfter(step, nil)}), env.Call("ADD", "c1", env.ContNS, o.json()))
				Expect(out.Err).NotTo(BeNil())
				Expect(out.Err.Msg).To(ContainSubstring("injected failure"))
				Expect(takeSnapshot(env.HostNS, env.ContNS, env.DataDir)).To(Equal(before))

				// And the same ADD then succeeds.
				env.Add(o.ver, "c1", env.ContNS, o.json())
			})

			It("leaves nothing behind after a panic after "+step, func() {
				o := netOpts{ver: "1.1.0", dataDir: env.DataDir, dual: true, ipMasq: true, backend: backend, routes: []string{"0.0.0.0/0"}}
				before := takeSnapshot(env.HostNS, env.ContNS, env.DataDir)
				out := testutil.RunIn(env.HostNS, ptp.New(attach.Hooks{AfterStep: testutil.PanicAfter(step)}), env.Call("ADD", "c1", env.ContNS, o.json()))
				testutil.ExpectCode(out, types.ErrInternal)
				Expect(out.Err.Msg).To(ContainSubstring("injected panic"))
				Expect(takeSnapshot(env.HostNS, env.ContNS, env.DataDir)).To(Equal(before))
			})
		}
	}, Entry("iptables", netfilter.BackendIPTables), Entry("nftables", netfilter.BackendNFTables))

	It("undoes everything when the container already has the interface", func() {
		h := testutil.Handle(env.ContNS)
		la := netlink.NewLinkAttrs()
		la.Name = "eth0"
		Expect(h.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "peer0"})).To(Succeed())
		o := netOpts{ver: "1.1.0", dataDir: env.DataDir, ipMasq: true}
		before := takeSnapshot(env.HostNS, env.ContNS, env.DataDir)
		out := env.Run("ADD", "c1", env.ContNS, o.json())
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Msg).To(ContainSubstring("eth0"))
		Expect(takeSnapshot(env.HostNS, env.ContNS, env.DataDir)).To(Equal(before))
	})

	Describe("DEL with the netns gone", func() {
		It("succeeds when the namespace was destroyed", func() {
			gone, cleanup := testutil.NewRemovableNS()
			o := netOpts{ver: "1.1.0", dataDir: env.DataDir, ipMasq: true}
			before := takeSnapshot(env.HostNS, env.ContNS, env.DataDir)
			env.Add(o.ver, "c1", gone, o.json())
			cleanup()

			c := env.Call("DEL", "c1", gone, o.json())
			testutil.MustRunIn(env.HostNS, ptpPlugin, c)
			testutil.MustRunIn(env.HostNS, ptpPlugin, c)
			// The namespace's teardown runs in a kernel worker; the host
			// end disappears with it or with our DEL, whichever is first.
			Eventually(func() []string { return testutil.LinkNames(env.HostNS) }).Should(Equal(before.HostLinks))
			Expect(takeSnapshot(env.HostNS, env.ContNS, env.DataDir)).To(Equal(before))
		})

		It("removes a pair the unmounted namespace kept alive", func() {
			gone, cleanup := testutil.NewRemovableNS()
			held, err := ns.Open(gone.Path()) // a stray reference
			Expect(err).NotTo(HaveOccurred())
			defer held.Close()
			o := netOpts{ver: "1.1.0", dataDir: env.DataDir}
			res := env.Add(o.ver, "c1", gone, o.json())
			cleanup()
			Expect(testutil.LinkNames(env.HostNS)).To(ContainElement(res.Interfaces[0].Name))

			env.Must("DEL", "c1", gone, o.json())
			Expect(testutil.LinkNames(env.HostNS)).To(ConsistOf("lo"))
			Expect(testutil.LinkNames(held)).To(ConsistOf("lo"))
			Expect(testutil.Reservations(env.DataDir)).To(BeEmpty())
		})
	})

	Describe("DEL deletes only what it owns", func() {
		It("treats a netns path that is no longer a namespace as gone", func() {
			gone, cleanup := testutil.NewRemovableNS()
			held, err := ns.Open(gone.Path()) // keeps the pair alive
			Expect(err).NotTo(HaveOccurred())
			defer held.Close()
			o := netOpts{ver: "1.1.0", dataDir: env.DataDir, ipMasq: true}
			res := env.Add(o.ver, "c1", gone, o.json())
			cleanup()
			// The runtime unmounted the namespace but left its file.
			Expect(os.WriteFile(gone.Path(), nil, 0o444)).To(Succeed())
			DeferCleanup(os.Remove, gone.Path())

			c := env.Call("DEL", "c1", gone, o.json())
			testutil.MustRunIn(env.HostNS, ptpPlugin, c)
			Expect(testutil.LinkNames(env.HostNS)).NotTo(ContainElement(res.Interfaces[0].Name))
			Expect(testutil.LinkNames(held)).To(ConsistOf("lo"))
			Expect(testutil.Reservations(env.DataDir)).To(BeEmpty())
			Expect(natRules(env.HostNS)).To(BeEmpty())
			testutil.MustRunIn(env.HostNS, ptpPlugin, c)
		})

		It("leaves a host link that got the attachment's hashed name later alone", func() {
			o := netOpts{ver: "1.1.0", dataDir: env.DataDir}
			res := env.Add(o.ver, "a", env.ContNS, o.json())
			name := res.Interfaces[0].Name
			env.Must("DEL", "a", env.ContNS, o.json())
			// Another attachment's host end, named like a's by a hash
			// collision, tagged as its own.
			h := testutil.Handle(env.HostNS)
			la := netlink.NewLinkAttrs()
			la.Name = name
			Expect(h.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "peerb"})).To(Succeed())
			l, err := h.LinkByName(name)
			Expect(err).NotTo(HaveOccurred())
			Expect(h.LinkSetAlias(l, "cni:b:eth0")).To(Succeed())
			env.Must("DEL", "a", nil, o.json())
			Expect(testutil.LinkNames(env.HostNS)).To(ContainElements(name, "peerb"))
		})

		It("leaves another plugin's interface of the same name alone", func() {
			h := testutil.Handle(env.ContNS)
			la := netlink.NewLinkAttrs()
			la.Name = "eth0"
			Expect(h.LinkAdd(&netlink.Bridge{LinkAttrs: la})).To(Succeed()) // not a veth: another plugin's
			o := netOpts{ver: "1.1.0", dataDir: env.DataDir}
			Expect(env.Run("ADD", "c1", env.ContNS, o.json()).Err).NotTo(BeNil())
			// The runtime cleans up after the failed ADD.
			env.Must("DEL", "c1", env.ContNS, o.json())
			Expect(testutil.LinkNames(env.ContNS)).To(ConsistOf("lo", "eth0"))
		})

		It("tags both ends with the attachment's alias", func() {
			o := netOpts{ver: "1.1.0", dataDir: env.DataDir}
			res := env.Add(o.ver, "c1", env.ContNS, o.json())
			for n, name := range map[*ns.NetNS]string{env.HostNS: res.Interfaces[0].Name, env.ContNS: "eth0"} {
				l, err := testutil.Handle(n).LinkByName(name)
				Expect(err).NotTo(HaveOccurred())
				Expect(l.Attrs().Alias).To(Equal("cni:c1:eth0"), name)
			}
		})
	})

	DescribeTable("CHECK catches",
		func(breakIt func(res *current.Result), errHas string) {
			o := netOpts{ver: "1.1.0", dataDir: env.DataDir, dual: true, ipMasq: true, routes: []string{"10.200.0.0/16"}}
			res := env.Add(o.ver, "c1", env.ContNS, o.json())
			checkCall := env.Call("CHECK", "c1", env.ContNS, o.withPrev(res).json())
			testutil.MustRunIn(env.HostNS, ptpPlugin, checkCall)
			breakIt(res)
			out := testutil.RunIn(env.HostNS, ptpPlugin, checkCall)
			Expect(out.Err).NotTo(BeNil())
			Expect(out.Err.Msg).To(ContainSubstring(errHas))
		},
		Entry("a deleted container address", func(res *current.Result) {
			h := testutil.Handle(env.ContNS)
			l, err := h.LinkByName("eth0")
			Expect(err).NotTo(HaveOccurred())
			Expect(h.AddrDel(l, &netlink.Addr{IPNet: &res.IPs[1].Address})).To(Succeed())
		}, "lacks address fd00:1::"),
		Entry("a deleted container route", func(res *current.Result) {
			h := testutil.Handle(env.ContNS)
			l, err := h.LinkByName("eth0")
			Expect(err).NotTo(HaveOccurred())
			_, dst, _ := net.ParseCIDR("10.200.0.0/16")
			Expect(h.RouteDel(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: dst})).To(Succeed())
		}, "lacks route 10.200.0.0/16"),
		Entry("a deleted subnet route", func(res *current.Result) {
			h := testutil.Handle(env.ContNS)
			l, err := h.LinkByName("eth0")
			Expect(err).NotTo(HaveOccurred())
			_, dst, _ := net.ParseCIDR(subnet4)
			Expect(h.RouteDel(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: dst})).To(Succeed())
		}, "lacks route "+subnet4),
		Entry("a deleted veth", func(res *current.Result) {
			h := testutil.Handle(env.HostNS)
			l, err := h.LinkByName(res.Interfaces[0].Name)
			Expect(err).NotTo(HaveOccurred())
			Expect(h.LinkDel(l)).To(Succeed())
		}, `"eth0"`),
		Entry("a deleted host route", func(res *current.Result) {
			h := testutil.Handle(env.HostNS)
			l, err := h.LinkByName(res.Interfaces[0].Name)
			Expect(err).NotTo(HaveOccurred())
			dst := &net.IPNet{IP: res.IPs[0].Address.IP, Mask: net.CIDRMask(32, 32)}
			Expect(h.RouteDel(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: dst, Scope: netlink.SCOPE_LINK})).To(Succeed())
		}, "lacks route "+"10.1.1."),
		Entry("a deleted gateway address on the host end", func(res *current.Result) {
			h := testutil.Handle(env.HostNS)
			l, err := h.LinkByName(res.Interfaces[0].Name)
			Expect(err).NotTo(HaveOccurred())
			Expect(h.AddrDel(l, &netlink.Addr{IPNet: testutil.MustCIDR(gw6 + "/128")})).To(Succeed())
		}, "lacks address "+gw6+"/128"),
		Entry("a container end that is down", func(res *current.Result) {
			h := testutil.Handle(env.ContNS)
			l, err := h.LinkByName("eth0")
			Expect(err).NotTo(HaveOccurred())
			Expect(h.LinkSetDown(l)).To(Succeed())
		}, `"eth0" is down`),
		Entry("a changed container MAC", func(res *current.Result) {
			h := testutil.Handle(env.ContNS)
			l, err := h.LinkByName("eth0")
			Expect(err).NotTo(HaveOccurred())
			Expect(h.LinkSetHardwareAddr(l, net.HardwareAddr{0x02, 0xde, 0xad, 0, 0, 9})).To(Succeed())
		}, `"eth0" in `+"/run/netns/"),
		Entry("a host end that is not the one ADD reported", func(res *current.Result) {
			h := testutil.Handle(env.HostNS)
			l, err := h.LinkByName(res.Interfaces[0].Name)
			Expect(err).NotTo(HaveOccurred())
			Expect(h.LinkSetDown(l)).To(Succeed())
			Expect(h.LinkSetName(l, "renamed0")).To(Succeed())
			Expect(h.LinkSetUp(l)).To(Succeed())
		}, `is "renamed0", prevResult says`),
		Entry("removed masquerade rules", func(res *current.Result) {
			Expect(env.HostNS.Do(func() error {
				return masq.TeardownMasqAll(netfilter.Owner{Network: netName, ContainerID: "c1", IfName: "eth0"})
			})).To(Succeed())
		}, "masquerade"),
	)

	It("cleans up on DEL whatever prevResult holds: it never parses it", func() {
		o := netOpts{ver: "1.1.0", dataDir: env.DataDir, dual: true, ipMasq: true}
		before := takeSnapshot(env.HostNS, env.ContNS, env.DataDir)
		env.Add(o.ver, "c1", env.ContNS, o.json())
		bad := o
		bad.prevRes = []byte(`{"cniVersion": "9.9.9"}`)
		env.Must("DEL", "c1", env.ContNS, bad.json())
		Expect(takeSnapshot(env.HostNS, env.ContNS, env.DataDir)).To(Equal(before))
	})

	It("removes an upstream-made pair, untagged, whose host end has a random name", func() {
		h := testutil.Handle(env.HostNS)
		la := netlink.NewLinkAttrs()
		la.Name = "veth5a1b2c3d" // not the name ptp derives: upstream picks one at random
		Expect(h.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(env.ContNS.Fd()))})).To(Succeed())
		o := netOpts{ver: "1.1.0", dataDir: env.DataDir}
		env.Must("DEL", "c1", env.ContNS, o.json())
		Expect(testutil.LinkNames(env.ContNS)).To(ConsistOf("lo"))
		Expect(testutil.LinkNames(env.HostNS)).To(ConsistOf("lo"))
	})

	It("refuses its own namespace as CNI_NETNS with code 8 before any change", func() {
		o := netOpts{ver: "1.1.0", dataDir: env.DataDir, ipMasq: true}
		before := takeSnapshot(env.HostNS, env.ContNS, env.DataDir)
		out := env.Run("ADD", "c1", env.HostNS, o.json())
		testutil.ExpectCode(out, types.ErrInvalidNetNS)
		Expect(out.Err.Msg).To(ContainSubstring(env.HostNS.Path()))
		Expect(takeSnapshot(env.HostNS, env.ContNS, env.DataDir)).To(Equal(before))
		var e types.Error
		Expect(json.Unmarshal(out.Stdout, &e)).To(Succeed(), "one JSON document on stdout: %s", out.Stdout)
	})

	It("runs GC and STATUS as the built binary with only CNI_COMMAND and CNI_PATH set", func() {
		o := netOpts{ver: "1.1.0", dataDir: env.DataDir, ipMasq: true, extraKeys: `"cni.dev/valid-attachments": []`}
		for _, cmd := range []string{"GC", "STATUS"} {
			var out testutil.Output
			Expect(env.HostNS.Do(func() (err error) {
				out, err = testutil.Exec("ptp", testutil.Call{Command: cmd, Stdin: o.json()})
				return err
			})).To(Succeed())
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
			c := env.Call("ADD", "c1", env.ContNS, fakeConf)
			c.Path = path
			return testutil.RunIn(env.HostNS, ptpPlugin, c)
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
				Expect(testutil.LinkNames(env.HostNS)).To(ConsistOf("lo"))
				Expect(testutil.LinkNames(env.ContNS)).To(ConsistOf("lo"))
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
			Expect(testutil.LinkNames(env.HostNS)).To(ConsistOf("lo"))
		})
	})

	It("refuses CHECK without prevResult", func() {
		o := netOpts{ver: "1.1.0", dataDir: env.DataDir}
		env.Add(o.ver, "c1", env.ContNS, o.json())
		out := env.Run("CHECK", "c1", env.ContNS, o.json())
		testutil.ExpectCode(out, types.ErrInvalidNetworkConfig)
		Expect(out.Err.Msg).To(ContainSubstring("prevResult"))
	})

	It("collects what GC's valid attachments no longer list, and forwards STATUS", func() {
		other := testutil.NewNS()
		o := netOpts{ver: "1.1.0", dataDir: env.DataDir, ipMasq: true}
		a := env.Add(o.ver, "a", env.ContNS, o.json())
		b := env.Add(o.ver, "b", other, o.json())
		Expect(testutil.Reservations(env.DataDir)).To(HaveLen(2))

		testutil.MustRunIn(env.HostNS, ptpPlugin, testutil.Call{Command: "STATUS", Stdin: o.json()})

		gc := o
		gc.extraKeys = `"cni.dev/valid-attachments": [{"containerID": "b", "ifname": "eth0"}]`
		testutil.MustRunIn(env.HostNS, ptpPlugin, testutil.Call{Command: "GC", Stdin: gc.json()})
		Expect(testutil.Reservations(env.DataDir)).To(ConsistOf(netName + "/" + b.IPs[0].Address.IP.String()))
		ownerA := netfilter.Owner{Network: netName, ContainerID: "a", IfName: "eth0"}
		ownerB := netfilter.Owner{Network: netName, ContainerID: "b", IfName: "eth0"}
		Expect(errors.Is(masqCheck(env.HostNS, "", ownerA, []*net.IPNet{&a.IPs[0].Address}), netfilter.ErrMissing)).To(BeTrue())
		Expect(masqCheck(env.HostNS, "", ownerB, []*net.IPNet{&b.IPs[0].Address})).To(Succeed())
	})

	Describe("bad input", func() {
		expectNothingMade := func() {
			GinkgoHelper()
			Expect(testutil.LinkNames(env.HostNS)).To(ConsistOf("lo"))
			Expect(testutil.LinkNames(env.ContNS)).To(ConsistOf("lo"))
			Expect(testutil.Reservations(env.DataDir)).To(BeEmpty())
		}
		testutil.RefusalSpecs(func(c testutil.Call) testutil.Output { return testutil.RunIn(env.HostNS, ptpPlugin, c) },
			func(ver string) testutil.Call {
				return env.Call("ADD", "c1", env.ContNS, netOpts{ver: ver, dataDir: env.DataDir}.json())
			},
			expectNothingMade)
		DescribeTable("rejects invalid values with code 7 naming the key",
			func(stdin, key string) {
				out := env.Run("ADD", "c1", env.ContNS, []byte(stdin))
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
			o := netOpts{ver: "1.1.0", dataDir: env.DataDir}
			c := env.Call("ADD", "c1", env.ContNS, o.json())
			c.Netns = "/proc/self/status"
			out := testutil.RunIn(env.HostNS, ptpPlugin, c)
			testutil.ExpectCode(out, types.ErrInvalidNetNS)
			Expect(out.Err.Msg).To(ContainSubstring("/proc/self/status"))
			expectNothingMade()
		})
		It("passes an IPAM failure through and makes nothing", func() {
			stdin := []byte(`{"cniVersion": "1.1.0", "name": "n", "type": "ptp", "ipam": {"type": "host-local", "env.DataDir": "` +
				env.DataDir + `", "ranges": [[{"subnet": "10.1.1.0/33"}]]}}`)
			out := env.Run("ADD", "c1", env.ContNS, stdin)
			Expect(out.Err).NotTo(BeNil())
			Expect(out.Err.Msg).To(ContainSubstring("10.1.1.0/33"))
			expectNothingMade()
		})
	})

	It("works as the built binary", func() {
		o := netOpts{ver: "1.1.0", dataDir: env.DataDir, dual: true}
		var out testutil.Output
		Expect(env.HostNS.Do(func() (err error) {
			out, err = testutil.Exec("ptp", env.Call("ADD", "c1", env.ContNS, o.json()))
			return err
		})).To(Succeed())
		Expect(out.Err).To(BeNil(), "stderr: %s", out.Stderr)
		res := testutil.ParseResult("1.1.0", out.Stdout)
		Expect(testutil.Ping(env.ContNS, gw6)).To(Succeed())
		Expect(env.HostNS.Do(func() (err error) {
			out, err = testutil.Exec("ptp", env.Call("DEL", "c1", env.ContNS, o.json()))
			return err
		})).To(Succeed())
		Expect(out.Err).To(BeNil(), "stderr: %s", out.Stderr)
		Expect(testutil.LinkNames(env.HostNS)).NotTo(ContainElement(res.Interfaces[0].Name))
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
