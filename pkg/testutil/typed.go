package testutil

import (
	"net"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ns"
)

// MustCIDR parses s ("10.1.0.5/24") into an IPNet that keeps the address,
// where net.ParseCIDR's network drops it; it fails the spec on a bad s.
func MustCIDR(s string) *net.IPNet {
	ginkgo.GinkgoHelper()
	ip, n, err := net.ParseCIDR(s)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	n.IP = ip
	return n
}

// LinkAs is link name in n as netlink type T (*netlink.Tuntap,
// *netlink.Vrf, ...); it fails the spec if there is no such link or it is
// of another kind.
func LinkAs[T netlink.Link](n *ns.NetNS, name string) T {
	ginkgo.GinkgoHelper()
	l, err := Handle(n).LinkByName(name)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	t, ok := l.(T)
	gomega.Expect(ok).To(gomega.BeTrue(), "%s is a %s", name, l.Type())
	return t
}
