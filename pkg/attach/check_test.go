package attach_test

import (
	"net"

	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/testutil"
)

// CheckRoutes finds a route the main table lacks in a table that traffic
// from the interface's address is looked up in (sbr's "from <addr> lookup
// <table>", issue 22), and in no other.
var _ = Describe("CheckRoutes", func() {
	want := []*types.Route{{Dst: net.IPNet{IP: net.ParseIP("10.99.0.0").To4(), Mask: net.CIDRMask(16, 32)}, GW: net.ParseIP("10.66.0.1")}}

	DescribeTable("with the route in table 100 only",
		func(rule func(*netlink.Rule), found bool) {
			hostNS, contNS := testutil.NewNS(), testutil.NewNS()
			Expect(testutil.ConnectNS(testutil.VethEnd{NS: hostNS, Name: "h0", Addrs: []string{"10.66.0.1/24"}},
				testutil.VethEnd{NS: contNS, Name: "eth0", Addrs: []string{"10.66.0.2/24"}})).To(Succeed())
			h := testutil.Handle(contNS)
			l, err := h.LinkByName("eth0")
			Expect(err).NotTo(HaveOccurred())
			_, dst, _ := net.ParseCIDR("10.99.0.0/16")
			Expect(h.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: dst, Gw: net.ParseIP("10.66.0.1"), Table: 100})).To(Succeed())
			r := netlink.NewRule()
			r.Table, r.Priority, r.Family = 100, 500, netlink.FAMILY_V4
			rule(r)
			Expect(h.RuleAdd(r)).To(Succeed())

			err = attach.CheckRoutes(contNS, h, l, want)
			if found {
				Expect(err).NotTo(HaveOccurred())
			} else {
				Expect(err).To(MatchError(ContainSubstring(`"eth0" lacks route 10.99.0.0/16 via 10.66.0.1`)))
			}
		},
		Entry("from the interface's address", func(r *netlink.Rule) {
			r.Src = &net.IPNet{IP: net.ParseIP("10.66.0.2").To4(), Mask: net.CIDRMask(32, 32)}
		}, true),
		Entry("from its subnet", func(r *netlink.Rule) {
			r.Src = &net.IPNet{IP: net.ParseIP("10.66.0.0").To4(), Mask: net.CIDRMask(24, 32)}
		}, true),
		Entry("from another address", func(r *netlink.Rule) {
			r.Src = &net.IPNet{IP: net.ParseIP("10.66.0.3").To4(), Mask: net.CIDRMask(32, 32)}
		}, false),
		Entry("from the address, but only with a mark", func(r *netlink.Rule) {
			r.Src = &net.IPNet{IP: net.ParseIP("10.66.0.2").To4(), Mask: net.CIDRMask(32, 32)}
			r.Mark = 7
		}, false),
		Entry("from the address, but only into another interface", func(r *netlink.Rule) {
			r.Src = &net.IPNet{IP: net.ParseIP("10.66.0.2").To4(), Mask: net.CIDRMask(32, 32)}
			r.IifName = "lo"
		}, false),
	)
})
