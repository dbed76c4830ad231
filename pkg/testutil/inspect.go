package testutil

import (
	"sort"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ns"
)

// Handle returns a netlink handle bound to n (it reads and changes n, not
// the calling thread's namespace) and registers its closing with Ginkgo's
// DeferCleanup.
func Handle(n *ns.NetNS) *netlink.Handle {
	ginkgo.GinkgoHelper()
	h, err := n.Handle()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	ginkgo.DeferCleanup(h.Close)
	return h
}

// LinkNames lists the names of every link in n, lo included, sorted.
func LinkNames(n *ns.NetNS) []string {
	ginkgo.GinkgoHelper()
	links, err := Handle(n).LinkList()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	var names []string
	for _, l := range links {
		names = append(names, l.Attrs().Name)
	}
	sort.Strings(names)
	return names
}

// Addrs lists the addresses of link ifName in n as "ip/prefix", in the
// kernel's order. Link-local addresses are left out: the kernel adds them by
// itself, so they say nothing about what a plugin did.
func Addrs(n *ns.NetNS, ifName string) []string {
	ginkgo.GinkgoHelper()
	h := Handle(n)
	l, err := h.LinkByName(ifName)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	addrs, err := ip.AddrList(h, l, netlink.FAMILY_ALL)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	var out []string
	for _, a := range addrs {
		if a.IP.IsLinkLocalUnicast() {
			continue
		}
		out = append(out, a.IPNet.String())
	}
	return out
}

// Routes renders the main-table routes of n (both families) as `ip route`
// would, with interface names instead of indexes, sorted:
// "default via 10.1.1.1 dev eth0", "10.1.1.2/32 dev veth0 scope link".
// Routes to link-local and multicast destinations are left out: the kernel
// adds them for every IPv6 link by itself.
func Routes(n *ns.NetNS) []string {
	ginkgo.GinkgoHelper()
	h := Handle(n)
	routes, err := ip.RouteList(h, nil, netlink.FAMILY_ALL)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	var out []string
	for _, r := range routes {
		if r.Dst != nil && (r.Dst.IP.IsLinkLocalUnicast() || r.Dst.IP.IsMulticast()) {
			continue
		}
		s := "default"
		if !ip.IsDefault(r.Dst) {
			s = r.Dst.String()
		}
		if r.Gw != nil {
			s += " via " + r.Gw.String()
		}
		if l, err := h.LinkByIndex(r.LinkIndex); err == nil {
			s += " dev " + l.Attrs().Name
		}
		// IPv6 routes have no scope: the kernel reports universe for all.
		if r.Scope == netlink.SCOPE_LINK {
			s += " scope link"
		}
		if r.Src != nil {
			s += " src " + r.Src.String()
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}
