package portmap_test

import (
	"net"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/testutil"
)

// Only "no route" (unreachable) lets ADD skip route_localnet, as upstream
// does for a container the host cannot route to yet. Any other failure to
// find the host interface (here a prohibit route: EACCES) is an error ADD
// reports, naming the address, and leaves nothing behind (issue 29: a
// mutation skipping on any error survived every test).
var _ = Describe("route_localnet's route lookup", func() {
	It("fails ADD on a lookup error other than unreachable, naming the address, and leaves no rule", func() {
		e := newEnv()
		hh := testutil.Handle(e.host)
		Expect(hh.RouteAdd(&netlink.Route{Dst: &net.IPNet{IP: net.ParseIP(contIP4).To4(), Mask: net.CIDRMask(32, 32)},
			Type: unix.RTN_PROHIBIT})).To(Succeed())
		stdin := confOpts{ver: "1.1.0", backend: "nftables", mappings: []mapping{{HostPort: 80, ContainerPort: 8080}},
			prev: e.prevResult("1.1.0")}.json()
		out := run(e, attach.Hooks{}, call("ADD", "c1", e, stdin))
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Msg + out.Err.Details).To(ContainSubstring(contIP4))
		Expect(forwards(e.host)).To(BeEmpty())
		Expect(ipt(e.host, "sysctl", "-n", "net.ipv4.conf."+hostIf+".route_localnet")).To(Equal("0\n"))
	})
})
