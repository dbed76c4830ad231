package macvlan_test

import (
	"fmt"
	"net"
	"os"

	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
)

var (
	readFile = os.ReadFile
	errorf   = fmt.Errorf
)

func parseIP(s string) net.IP { return net.ParseIP(s) }

func mustAddr(s string) *netlink.Addr {
	a, err := netlink.ParseAddr(s)
	Expect(err).NotTo(HaveOccurred())
	return a
}
