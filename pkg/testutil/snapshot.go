package testutil

import (
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ns"
)

// Snapshot is, as text, what an attachment could leave behind in a
// stand-in host namespace, a container namespace and an IPAM data folder.
// Compare a snapshot taken before a failing ADD with one taken after.
type Snapshot struct {
	HostLinks, ContLinks   []string
	HostAddrs, ContAddrs   []string // "<link> <ip/prefix>"
	HostRoutes, ContRoutes []string
	Rules                  []string // policy routing rules of both
	Files                  []string // host-local reservations under dataDir
	// Extra is what the extra functions passed to TakeSnapshot returned
	// (a plugin's netfilter rules, for one), in order.
	Extra [][]string
}

// TakeSnapshot reads a Snapshot of hostNS, contNS and dataDir, plus
// whatever each of extra returns.
func TakeSnapshot(hostNS, contNS *ns.NetNS, dataDir string, extra ...func() []string) Snapshot {
	ginkgo.GinkgoHelper()
	s := Snapshot{
		HostLinks: LinkNames(hostNS), ContLinks: LinkNames(contNS),
		HostAddrs: AllAddrs(hostNS), ContAddrs: AllAddrs(contNS),
		HostRoutes: Routes(hostNS), ContRoutes: Routes(contNS),
		Rules: append(IPRules(hostNS), IPRules(contNS)...),
		Files: Reservations(dataDir),
	}
	for _, fn := range extra {
		s.Extra = append(s.Extra, fn())
	}
	return s
}

// AllAddrs lists every address of every link in n as "<link> <ip/prefix>",
// link-local ones left out (see Addrs).
func AllAddrs(n *ns.NetNS) []string {
	ginkgo.GinkgoHelper()
	var out []string
	for _, name := range LinkNames(n) {
		for _, a := range Addrs(n, name) {
			out = append(out, name+" "+a)
		}
	}
	return out
}

// IPRules lists the policy routing rules of n, both families.
func IPRules(n *ns.NetNS) []string {
	ginkgo.GinkgoHelper()
	var out []string
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rules, err := Handle(n).RuleList(fam)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		for _, r := range rules {
			out = append(out, r.String())
		}
	}
	return out
}
