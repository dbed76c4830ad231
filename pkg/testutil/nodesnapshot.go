package testutil

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ns"
)

// NodeOpts says what TakeNodeSnapshot reads.
type NodeOpts struct {
	// Host and Cont are the stand-in host's and the container's
	// namespaces; a nil one is not read (Cont after the container died).
	// Each gives links with their attributes, addresses, routes of every
	// table, policy rules, and qdiscs and tc filters, under the sections
	// "host ..." and "container ...".
	Host, Cont *ns.NetNS
	// Sysctls adds every readable sysctl under /proc/sys/net of each
	// namespace ("<ns> sysctl"), less the volatile ones (volatileSysctl).
	// It walks hundreds of files: too slow for thousands of snapshots.
	Sysctls bool
	// Netfilter adds the host's netfilter state ("netfilter": see
	// NetfilterLines, counters zeroed); it execs the dump tools.
	Netfilter bool
	// WithoutSharedBase leaves out of Netfilter what SharedBase matches.
	WithoutSharedBase bool
	// Dirs are folders whose every entry is part of the snapshot ("file":
	// folders, symlinks and files with their content), each under the
	// folder's base name: "file ipam/net1/10.1.0.2 ...".
	Dirs []string
	// NameOnly, when set, says of which files (by "<base>/<relative
	// path>") only the name is compared: their content moves by design.
	NameOnly func(path string) bool
	// NoDefaultQdiscs leaves out a link's default qdisc (no handle:
	// noqueue, mq, pfifo_fast...), which the kernel picks anew when a link
	// moves between namespaces; ingress and clsact stay.
	NoDefaultQdiscs bool
	// NoBridgeMAC leaves out the MAC address of bridges: a bridge without
	// a set address takes its lowest port's, and keeps the last one when
	// the port goes, which says nothing about a leak.
	NoBridgeMAC bool
}

// NodeSnapshot is, as sorted text lines "<section>: <item>", what any
// plugin could leave behind on a node (see NodeOpts). Compare two with
// Changes or Diff. It opens one netlink handle per namespace and closes
// it, so a spec may take thousands.
type NodeSnapshot []string

// TakeNodeSnapshot reads what o says into a NodeSnapshot.
func TakeNodeSnapshot(o NodeOpts) NodeSnapshot {
	ginkgo.GinkgoHelper()
	var s NodeSnapshot
	add := func(section string, items []string) {
		for _, it := range items {
			s = append(s, section+": "+it)
		}
	}
	for _, n := range []struct {
		name string
		ns   *ns.NetNS
	}{{"host", o.Host}, {"container", o.Cont}} {
		if n.ns == nil {
			continue
		}
		lines, err := netState(n.ns, o)
		gomega.Expect(err).NotTo(gomega.HaveOccurred(), "read the state of %s", n.ns.Path())
		for _, l := range lines {
			s = append(s, n.name+" "+l)
		}
		if o.Sysctls {
			add(n.name+" sysctl", NetSysctls(n.ns))
		}
	}
	if o.Netfilter && o.Host != nil {
		lines := NetfilterLines(o.Host)
		if o.WithoutSharedBase {
			lines = WithoutSharedBase(lines)
		}
		add("netfilter", lines)
	}
	for _, d := range o.Dirs {
		add("file", dirEntries(d, o.NameOnly))
	}
	slices.Sort(s)
	return s
}

// Without returns the lines of s for which drop is false.
func (s NodeSnapshot) Without(drop func(line string) bool) NodeSnapshot {
	return slices.DeleteFunc(slices.Clone(s), drop)
}

// Changes lists what differs from s to after, one entry per line only in s
// ("<section>: - <item>") or only in after ("<section>: + <item>"),
// counting repeats, sorted by section and item.
func (s NodeSnapshot) Changes(after NodeSnapshot) []string {
	count := map[string]int{}
	for _, l := range s {
		count[l]++
	}
	for _, l := range after {
		count[l]--
	}
	var out []string
	for l, n := range count {
		section, item, _ := strings.Cut(l, ": ")
		for ; n > 0; n-- {
			out = append(out, section+": - "+item)
		}
		for ; n < 0; n++ {
			out = append(out, section+": + "+item)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return strings.Compare(unsign(a), unsign(b)) })
	return out
}

// unsign moves the "-" or "+" after the section to the end, so that
// changes sort by section and item, "+" before "-" of the same item.
func unsign(c string) string {
	section, rest, _ := strings.Cut(c, ": ")
	return section + ": " + rest[2:] + " " + rest[:1]
}

// Diff is Changes grouped by section, one section heading then its lines
// indented; "" when s and after are equal.
func (s NodeSnapshot) Diff(after NodeSnapshot) string {
	var b strings.Builder
	section := ""
	for _, c := range s.Changes(after) {
		name, line, _ := strings.Cut(c, ": ")
		if name != section {
			fmt.Fprintf(&b, "%s:\n", name)
			section = name
		}
		fmt.Fprintf(&b, "  %s\n", line)
	}
	return b.String()
}

// netState renders n's links, addresses, routes, rules, qdiscs and tc
// filters, each line led by its section ("link", "addr", ...), through one
// netlink handle.
func netState(n *ns.NetNS, o NodeOpts) ([]string, error) {
	h, err := n.Handle()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	links, err := ip.LinkList(h)
	if err != nil {
		return nil, err
	}
	names := map[int]string{}
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	name := func(index int) string {
		if index == 0 {
			return ""
		}
		if n, ok := names[index]; ok {
			return n
		}
		return fmt.Sprint(index)
	}
	// Carrier flags (RUNNING, LOWER_UP) are left out: they follow the
	// peer (a veth's comes up by itself a moment after the pair is made),
	// not the plugin.
	const adminFlags = unix.IFF_UP | unix.IFF_BROADCAST | unix.IFF_LOOPBACK | unix.IFF_POINTOPOINT |
		unix.IFF_NOARP | unix.IFF_PROMISC | unix.IFF_ALLMULTI | unix.IFF_MULTICAST
	var out []string
	for _, l := range links {
		a := l.Attrs()
		mac := a.HardwareAddr.String()
		if o.NoBridgeMAC && l.Type() == "bridge" {
			mac = "-"
		}
		// The index tells a link deleted and made again from the same one.
		out = append(out, fmt.Sprintf("link: %s index=%d type=%s master=%s mtu=%d txqlen=%d flags=%#x promisc=%d allmulti=%d alias=%q mac=%s",
			a.Name, a.Index, l.Type(), name(a.MasterIndex), a.MTU, a.TxQLen, a.RawFlags&adminFlags, a.Promisc, a.Allmulti, a.Alias, mac))
		addrs, err := ip.AddrList(h, l, netlink.FAMILY_ALL)
		if err != nil {
			return nil, err
		}
		for _, ad := range addrs {
			if ad.IP.IsLinkLocalUnicast() {
				continue // the kernel adds these by itself
			}
			out = append(out, fmt.Sprintf("addr: %s %s", a.Name, ad.IPNet))
		}
		tc, err := tcState(h, l, o.NoDefaultQdiscs)
		if err != nil {
			return nil, err
		}
		out = append(out, tc...)
	}
	routes, err := ip.RouteListFiltered(h, netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, err
	}
	for _, r := range routes {
		// The kernel adds IPv6 link-local and multicast routes (the local
		// table's fe80:: and ff00::/8 included) for every link by itself.
		if r.Dst != nil && r.Dst.IP.To4() == nil && (r.Dst.IP.IsLinkLocalUnicast() || r.Dst.IP.IsMulticast()) {
			continue
		}
		out = append(out, fmt.Sprintf("route: table=%d type=%d dst=%v gw=%v dev=%s scope=%d src=%v proto=%d prio=%d mtu=%d",
			r.Table, r.Type, r.Dst, r.Gw, name(r.LinkIndex), r.Scope, r.Src, r.Protocol, r.Priority, r.MTU))
	}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rules, err := ip.RetryDump("list rules", func() ([]netlink.Rule, error) { return h.RuleList(fam) })
		if err != nil {
			return nil, err
		}
		for _, r := range rules {
			// netlink's String ends in a space; a line compared with a
			// constant (tests/property's l3mdev rule) must not.
			out = append(out, "rule: "+strings.TrimSpace(r.String()))
		}
	}
	return out, nil
}

// tcState renders l's qdiscs (the kernel's default ones too unless
// noDefault) and the tc filters under the
// root, ingress and clsact parents and under each qdisc.
func tcState(h *netlink.Handle, l netlink.Link, noDefault bool) ([]string, error) {
	name := l.Attrs().Name
	qdiscs, err := ip.RetryDump("list qdiscs", func() ([]netlink.Qdisc, error) { return h.QdiscList(l) })
	if err != nil {
		return nil, err
	}
	var out []string
	parents := []uint32{netlink.HANDLE_ROOT, netlink.HANDLE_INGRESS, netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS}
	for _, q := range qdiscs {
		qa := q.Attrs()
		if noDefault && qa.Handle == 0 && q.Type() != "ingress" && q.Type() != "clsact" {
			continue
		}
		out = append(out, fmt.Sprintf("qdisc: %s %s handle=%s parent=%s%s", name, q.Type(),
			netlink.HandleStr(qa.Handle), netlink.HandleStr(qa.Parent), qdiscParams(q)))
		if qa.Handle != 0 && !slices.Contains(parents, qa.Handle) {
			parents = append(parents, qa.Handle)
		}
	}
	for _, p := range parents {
		filters, err := ip.RetryDump("list filters", func() ([]netlink.Filter, error) { return h.FilterList(l, p) })
		if err != nil {
			continue // no qdisc at that parent to hold filters
		}
		for _, f := range filters {
			fa := f.Attrs()
			out = append(out, fmt.Sprintf("filter: %s %s parent=%s handle=%x prio=%d proto=%d",
				name, f.Type(), netlink.HandleStr(fa.Parent), fa.Handle, fa.Priority, fa.Protocol))
		}
	}
	return out, nil
}

// qdiscParams renders what bandwidth sets on its tbf qdiscs.
func qdiscParams(q netlink.Qdisc) string {
	if t, ok := q.(*netlink.Tbf); ok {
		return fmt.Sprintf(" rate=%d limit=%d buffer=%d", t.Rate, t.Limit, t.Buffer)
	}
	return ""
}

// volatileSysctl matches the sysctls that change by themselves (the
// conntrack counter) or cannot be read (stable_secret until set).
var volatileSysctl = regexp.MustCompile(`nf_conntrack_count$|/stable_secret$`)

// NetSysctls reads every readable file under /proc/sys/net inside n, as
// "<path> = <value>", sorted (see volatileSysctl for what is left out).
// An entry that goes away while it is read (its link was deleted) or that
// cannot be read (write-only, EPERM) is left out.
func NetSysctls(n *ns.NetNS) []string {
	ginkgo.GinkgoHelper()
	var out []string
	gomega.Expect(n.Do(func() error {
		// /proc/sys/net shows the namespace of the thread that reads it.
		return filepath.WalkDir("/proc/sys/net", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || volatileSysctl.MatchString(p) {
				return nil // unreadable or gone: says nothing
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil
			}
			out = append(out, p+" = "+strings.Join(strings.Fields(string(b)), " "))
			return nil
		})
	})).To(gomega.Succeed())
	slices.Sort(out)
	return out
}

// dirEntries lists everything under dir as "<base of dir>/<relative path>
// <kind> ...": folders, symlinks with their target, sockets, and files
// with their content (quoted up to 200 bytes, else its length and hash),
// or their name only where nameOnly says so. A dir that does not exist, or
// an entry that goes while it is read, holds nothing.
func dirEntries(dir string, nameOnly func(string) bool) []string {
	ginkgo.GinkgoHelper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		path := filepath.Join(filepath.Base(dir), rel)
		switch {
		case d.IsDir():
			out = append(out, path+" dir")
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out = append(out, path+" symlink "+target)
		case d.Type()&(fs.ModeSocket|fs.ModeNamedPipe|fs.ModeDevice) != 0:
			out = append(out, fmt.Sprintf("%s %s", path, d.Type()))
		case nameOnly != nil && nameOnly(path):
			out = append(out, path+" file")
		default:
			b, err := os.ReadFile(p)
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			if len(b) <= 200 {
				out = append(out, fmt.Sprintf("%s file %q", path, b))
				break
			}
			sum := sha256.Sum256(b)
			out = append(out, fmt.Sprintf("%s file (%d bytes, sha256 %s)", path, len(b), hex.EncodeToString(sum[:8])))
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return out
}

// Lines makes items lines of section, for comparing state a NodeSnapshot
// does not read (a DHCP server's leases, a rule set as text) the same way.
func Lines(section string, items []string) NodeSnapshot {
	out := make(NodeSnapshot, len(items))
	for i, it := range items {
		out[i] = section + ": " + it
	}
	return out
}
