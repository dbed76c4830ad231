package testutil

import (
	"fmt"
	"sort"
	"strings"

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

// FullSnapshotOpts says what TakeFullSnapshot reads beyond the namespaces.
type FullSnapshotOpts struct {
	// DataDirs are folders whose every file (path and content) is part of
	// the snapshot: host-local's dataDir, tuning's dataDir, dhcp's state.
	DataDirs []string
	// Netfilter includes the stand-in host's netfilter ruleset (see
	// NetfilterLines), less the shared base (see SharedBase).
	Netfilter bool
}

// FullSnapshot is what TakeFullSnapshot reads on top of a Snapshot. It
// lives in its own struct so that Snapshot's comparisons in existing specs
// keep their meaning.
type FullSnapshot struct {
	Snapshot
	// One line per link: "<name> type=<kind> master=<name> mtu=<n>
	// txqlen=<n> flags=<up,...> alias=<alias> mac=<mac>".
	HostLinkAttrs, ContLinkAttrs []string
	// Policy routing rules (Snapshot.Rules stays empty).
	HostRules, ContRules []string
	// Every route of every table, both families, "table=<n> <route>".
	HostAllRoutes, ContAllRoutes []string
	// Qdiscs and filters of every link.
	HostTC, ContTC []string
	// Every readable sysctl under /proc/sys/net, "<path> = <value>", less
	// the volatile ones (see volatileSysctl).
	HostSysctls, ContSysctls []string
	// The stand-in host's netfilter lines less SharedBase.
	Netfilter []string
	// "<file> <content>" for every file under the data dirs.
	DataFiles []string
}

// TakeFullSnapshot reads everything an attachment could leave behind in
// hostNS, contNS (nil: only the host is read, e.g. after the container
// died) and the folders of o. Compare two with Diff.
func TakeFullSnapshot(hostNS, contNS *ns.NetNS, o FullSnapshotOpts) FullSnapshot {
	ginkgo.GinkgoHelper()
	var s FullSnapshot
	s.HostLinks, s.HostAddrs, s.HostRoutes = LinkNames(hostNS), AllAddrs(hostNS), Routes(hostNS)
	s.HostRules = IPRules(hostNS)
	s.HostLinkAttrs, s.HostAllRoutes, s.HostTC = LinkAttrs(hostNS), AllRoutes(hostNS), TrafficControl(hostNS)
	s.HostSysctls = NetSysctls(hostNS)
	if contNS != nil {
		s.ContLinks, s.ContAddrs, s.ContRoutes = LinkNames(contNS), AllAddrs(contNS), Routes(contNS)
		s.ContRules = IPRules(contNS)
		s.ContLinkAttrs, s.ContAllRoutes, s.ContTC = LinkAttrs(contNS), AllRoutes(contNS), TrafficControl(contNS)
		s.ContSysctls = NetSysctls(contNS)
	}
	if o.Netfilter {
		s.Netfilter = WithoutSharedBase(NetfilterLines(hostNS))
	}
	for _, d := range o.DataDirs {
		s.DataFiles = append(s.DataFiles, DataFiles(d)...)
	}
	for _, d := range o.DataDirs {
		s.Files = append(s.Files, Reservations(d)...)
	}
	return s
}

// Diff says, field by field, which lines are only in s ("-") and which are
// only in after ("+"); "" when both are equal.
func (s FullSnapshot) Diff(after FullSnapshot) string {
	var b strings.Builder
	field := ""
	for _, c := range s.Changes(after) {
		name, line, _ := strings.Cut(c, ": ")
		if name != field {
			fmt.Fprintf(&b, "%s:\n", name)
			field = name
		}
		fmt.Fprintf(&b, "  %s\n", line)
	}
	return b.String()
}

// Changes lists what differs from s to after, one entry per line that is
// only in s ("<field>: - <line>") or only in after ("<field>: + <line>"),
// grouped by field in a fixed order.
func (s FullSnapshot) Changes(after FullSnapshot) []string {
	var out []string
	field := func(name string, x, y []string) {
		for _, l := range lineDiff(x, y) {
			out = append(out, name+": "+l)
		}
	}
	field("host links", s.HostLinks, after.HostLinks)
	field("host link attributes", s.HostLinkAttrs, after.HostLinkAttrs)
	field("host addresses", s.HostAddrs, after.HostAddrs)
	field("host routes (all tables)", s.HostAllRoutes, after.HostAllRoutes)
	field("host rules", s.HostRules, after.HostRules)
	field("host qdiscs and filters", s.HostTC, after.HostTC)
	field("host sysctls", s.HostSysctls, after.HostSysctls)
	field("container links", s.ContLinks, after.ContLinks)
	field("container link attributes", s.ContLinkAttrs, after.ContLinkAttrs)
	field("container addresses", s.ContAddrs, after.ContAddrs)
	field("container routes (all tables)", s.ContAllRoutes, after.ContAllRoutes)
	field("container rules", s.ContRules, after.ContRules)
	field("container qdiscs and filters", s.ContTC, after.ContTC)
	field("container sysctls", s.ContSysctls, after.ContSysctls)
	field("rules", s.Rules, after.Rules)
	field("netfilter (less the shared base)", s.Netfilter, after.Netfilter)
	field("data files", s.DataFiles, after.DataFiles)
	for i := range max(len(s.Extra), len(after.Extra)) {
		var x, y []string
		if i < len(s.Extra) {
			x = s.Extra[i]
		}
		if i < len(after.Extra) {
			y = after.Extra[i]
		}
		field(fmt.Sprintf("extra %d", i), x, y)
	}
	return out
}

// lineDiff lists the lines only in x as "- line" and those only in y as
// "+ line", counting repeats, sorted by line; none if x and y hold the same
// lines.
func lineDiff(x, y []string) []string {
	count := map[string]int{}
	for _, l := range x {
		count[l]++
	}
	for _, l := range y {
		count[l]--
	}
	var out []string
	for l, n := range count {
		for ; n > 0; n-- {
			out = append(out, "- "+l)
		}
		for ; n < 0; n++ {
			out = append(out, "+ "+l)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][2:] < out[j][2:] })
	return out
}
