package ip_test

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

var _ = Describe("deleting only what an attachment owns", func() {
	const alias = "cni:c1:eth0"
	var hostNS, contNS *ns.NetNS
	var hostH, contH *netlink.Handle

	BeforeEach(func() {
		hostNS = testutil.NewNS()
		contNS = testutil.NewNS()
		hostH = testutil.Handle(hostNS)
		contH = testutil.Handle(contNS)
	})

	// veth makes a veth pair in h's namespace: name (tagged with a, unless
	// a is "") and its peer "peer0".
	veth := func(h *netlink.Handle, name, a string) {
		GinkgoHelper()
		la := netlink.NewLinkAttrs()
		la.Name = name
		Expect(h.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "peer0"})).To(Succeed())
		if a != "" {
			l, err := h.LinkByName(name)
			Expect(err).NotTo(HaveOccurred())
			Expect(h.LinkSetAlias(l, a)).To(Succeed())
		}
	}

	It("builds the alias bridge and ptp tag both ends with", func() {
		Expect(ip.AttachmentAlias("c1", "eth0")).To(Equal(alias))
	})

	DescribeTable("DeleteContainerVeth",
		func(setup func() string, wantDeleted bool, wantLinks ...string) {
			nsPath := setup()
			deleted, err := ip.DeleteContainerVeth(nsPath, "eth0", alias)
			Expect(err).NotTo(HaveOccurred())
			Expect(deleted).To(Equal(wantDeleted))
			Expect(testutil.LinkNames(contNS)).To(ConsistOf(wantLinks))
		},
		Entry("deletes a veth with the alias", func() string { veth(contH, "eth0", alias); return contNS.Path() }, true, "lo"),
		Entry("deletes an untagged veth (an upstream ADD)", func() string { veth(contH, "eth0", ""); return contNS.Path() }, true, "lo"),
		Entry("keeps a veth of another attachment", func() string {
			veth(contH, "eth0", "cni:other:eth0")
			return contNS.Path()
		}, false, "lo", "eth0", "peer0"),
		Entry("keeps an interface of another kind", func() string {
			la := netlink.NewLinkAttrs()
			la.Name = "eth0"
			Expect(contH.LinkAdd(&netlink.Bridge{LinkAttrs: la})).To(Succeed()) // no dummy module on every kernel
			return contNS.Path()
		}, false, "lo", "eth0"),
		Entry("treats a missing interface as gone", func() string { return contNS.Path() }, false, "lo"),
		Entry("treats an empty path as gone", func() string { return "" }, false, "lo"),
		Entry("treats a missing namespace as gone", func() string {
			return filepath.Join(GinkgoT().TempDir(), "gone")
		}, false, "lo"),
		Entry("treats a file that is not a namespace (an unmounted netns file) as gone", func() string {
			p := filepath.Join(GinkgoT().TempDir(), "unmounted")
			Expect(os.WriteFile(p, nil, 0o644)).To(Succeed())
			return p
		}, false, "lo"),
	)

	It("DeleteOwnedVeth deletes a host link only when it is a veth with the alias", func() {
		veth(hostH, "vethmine", alias)
		Expect(ip.DeleteOwnedVeth(hostH, "vethmine", alias)).To(Succeed())
		Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo"))

		veth(hostH, "vethother", "cni:c2:eth0") // got the same hashed name later
		Expect(ip.DeleteOwnedVeth(hostH, "vethother", alias)).To(Succeed())
		Expect(testutil.LinkNames(hostNS)).To(ContainElement("vethother"))
		Expect(hostH.LinkDel(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "vethother"}})).To(Succeed())

		veth(hostH, "vethbare", "") // an untagged one is not known to be ours
		Expect(ip.DeleteOwnedVeth(hostH, "vethbare", alias)).To(Succeed())
		Expect(testutil.LinkNames(hostNS)).To(ContainElement("vethbare"))

		Expect(ip.DeleteOwnedVeth(hostH, "absent0", alias)).To(Succeed())
	})

	It("DeleteVethsByAlias deletes every veth with the alias and nothing else", func() {
		veth(hostH, "vetha", alias)
		la := netlink.NewLinkAttrs()
		la.Name = "vethb"
		Expect(hostH.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "peerb"})).To(Succeed())
		Expect(ip.DeleteVethsByAlias(hostH, alias)).To(Succeed())
		Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo", "vethb", "peerb"))
	})

	It("RoutesOn lists a link's routes, the default one as 0.0.0.0/0", func() {
		veth(hostH, "veth0", "")
		l, err := hostH.LinkByName("veth0")
		Expect(err).NotTo(HaveOccurred())
		Expect(hostH.LinkSetUp(l)).To(Succeed())
		a, err := netlink.ParseAddr("10.60.0.2/24")
		Expect(err).NotTo(HaveOccurred())
		Expect(hostH.AddrAdd(l, a)).To(Succeed())
		gw := a.IP.Mask(a.Mask)
		gw[3] = 1
		Expect(hostH.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: gw})).To(Succeed())
		routes, err := ip.RoutesOn(hostH, l)
		Expect(err).NotTo(HaveOccurred())
		var got []string
		for _, r := range routes {
			s := r.Dst.String()
			if r.GW != nil {
				s += " via " + r.GW.String()
			}
			got = append(got, s)
		}
		Expect(got).To(ConsistOf("0.0.0.0/0 via 10.60.0.1", "10.60.0.0/24"))
	})
})
