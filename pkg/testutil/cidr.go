package testutil

import (
	"net"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
)

// MustCIDR returns ip/prefix s as an IPNet that keeps the address (not the
// network's first address, as net.ParseCIDR's does), as a result's IPs
// and routes hold it.
func MustCIDR(s string) *net.IPNet {
	ginkgo.GinkgoHelper()
	ipa, n, err := net.ParseCIDR(s)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	n.IP = ipa
	return n
}
