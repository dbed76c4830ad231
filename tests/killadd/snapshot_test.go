package killadd

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

// What testutil.TakeSnapshot does not cover and a killed ADD could leave:
// link attributes (tuning's mtu, mac, txqlen, promisc, allmulti; a
// host-device left renamed), qdiscs (bandwidth's tbf and ingress, on the
// ifb too), routes and rules of every table (sbr), the sysctls of every
// link and of the namespace (tuning, bridge, ptp, portmap), the netfilter
// rule set, and every file under the plugins' state folders (host-local's
// index, tuning's saved state, the dhcp daemon's leases). Each function
// here opens and closes its own netlink handle: a campaign takes thousands
// of snapshots in one spec.

// withHandle runs fn with a netlink handle bound to n.
func withHandle(n *ns.NetNS, fn func(h *netlink.Handle) []string) []string {
	GinkgoHelper()
	h, err := n.Handle()
	Expect(err).NotTo(HaveOccurred())
	defer h.Close()
	return fn(h)
}

// linkStates renders every link of n with the attributes a plugin sets.
func linkStates(n *ns.NetNS) []string {
	GinkgoHelper()
	return withHandle(n, func(h *netlink.Handle) []string {
		links, err := h.LinkList()
		Expect(err).NotTo(HaveOccurred())
		names := map[int]string{}
		for _, l := range links {
			names[l.Attrs().Index] = l.Attrs().Name
		}
		var out []string
		for _, l := range links {
			a := l.Attrs()
			mac := a.HardwareAddr.String()
			if l.Type() == "bridge" {
				// A bridge without a set address takes its lowest port's; it
				// keeps the last one when the port goes, which says nothing
				// about a leak.
				mac = "-"
			}
			out = append(out, fmt.Sprintf("link %s type=%s mtu=%d mac=%s txqlen=%d up=%v promisc=%d allmulti=%d master=%s alias=%q",
				a.Name, l.Type(), a.MTU, mac, a.TxQLen, a.Flags&unix.IFF_UP != 0, a.Promisc, a.Allmulti, names[a.MasterIndex], a.Alias))
		}
		slices.Sort(out)
		return out
	})
}

// qdiscs renders every qdisc and tc filter of n (the kernel's default
// noqueue/mq/pfifo_fast root qdiscs included: they come and go with links).
func qdiscs(n *ns.NetNS) []string {
	GinkgoHelper()
	return withHandle(n, func(h *netlink.Handle) []string {
		links, err := h.LinkList()
		Expect(err).NotTo(HaveOccurred())
		var out []string
		for _, l := range links {
			qs, err := h.QdiscList(l)
			Expect(err).NotTo(HaveOccurred())
			for _, q := range qs {
				a := q.Attrs()
				out = append(out, fmt.Sprintf("qdisc %s %s handle %s parent %s", l.Attrs().Name, q.Type(),
					netlink.HandleStr(a.Handle), netlink.HandleStr(a.Parent)))
			}
			for _, parent := range []uint32{netlink.HANDLE_INGRESS, netlink.HANDLE_ROOT, netlink.MakeHandle(0xffff, 0)} {
				fs, err := h.FilterList(l, parent)
				if err != nil {
					continue // no qdisc there to hold filters
				}
				for _, f := range fs {
					out = append(out, fmt.Sprintf("filter %s parent %s %s", l.Attrs().Name, netlink.HandleStr(parent), f.Type()))
				}
			}
		}
		slices.Sort(out)
		return out
	})
}

// allRoutes renders the routes of every table of n but the local one (the
// kernel's own), both families.
func allRoutes(n *ns.NetNS) []string {
	GinkgoHelper()
	return withHandle(n, func(h *netlink.Handle) []string {
		routes, err := h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
		Expect(err).NotTo(HaveOccurred())
		var out []string
		for _, r := range routes {
			if r.Table == unix.RT_TABLE_LOCAL || (r.Dst != nil && (r.Dst.IP.IsLinkLocalUnicast() || r.Dst.IP.IsMulticast())) {
				continue
			}
			dev := ""
			if l, err := h.LinkByIndex(r.LinkIndex); err == nil {
				dev = l.Attrs().Name
			}
			out = append(out, fmt.Sprintf("route table %d dst %v gw %v dev %s src %v scope %d", r.Table, r.Dst, r.Gw, dev, r.Src, r.Scope))
		}
		slices.Sort(out)
		return out
	})
}

// volatileSysctls change by themselves or per link instance: not plugin
// state.
var volatileSysctls = map[string]bool{
	"stable_secret": true, // unreadable (EIO) until set
}

// sysctls renders the namespace-wide forwarding switch and every per-link
// sysctl of n (ipv4 and ipv6 conf: forwarding, proxy_arp, arp_filter,
// route_localnet, accept_ra...), read inside n.
func sysctls(n *ns.NetNS) []string {
	GinkgoHelper()
	var out []string
	Expect(n.Do(func() error {
		// /proc/sys/net shows the netns of the reading thread.
		for _, f := range []string{"ipv4/ip_forward", "ipv4/ip_local_port_range"} {
			b, err := os.ReadFile("/proc/sys/net/" + f)
			if err != nil {
				return err
			}
			out = append(out, f+"="+strings.TrimSpace(string(b)))
		}
		for _, dir := range []string{"ipv4/conf", "ipv6/conf"} {
			err := filepath.WalkDir("/proc/sys/net/"+dir, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					if os.IsNotExist(err) {
						return nil // a link went away while we read
					}
					return err
				}
				if d.IsDir() || volatileSysctls[d.Name()] {
					return nil
				}
				b, err := os.ReadFile(p)
				if err != nil {
					return nil // write-only, unreadable or gone: not state we compare
				}
				out = append(out, strings.TrimPrefix(p, "/proc/sys/net/")+"="+strings.TrimSpace(string(b)))
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})).To(Succeed())
	slices.Sort(out)
	return out
}

// stateFiles lists every file under dirs as "<dir index>/<path> <sha256>":
// a file added, removed or changed shows. Of files for which nameOnly is
// true, only the name.
func stateFiles(dirs []string, nameOnly func(rel string) bool) []string {
	GinkgoHelper()
	var out []string
	for i, dir := range dirs {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) {
					return nil
				}
				return err
			}
			rel, _ := filepath.Rel(dir, p) // p is under dir
			if d.IsDir() {
				out = append(out, fmt.Sprintf("%d/%s/", i, rel))
				return nil
			}
			if nameOnly(rel) {
				out = append(out, fmt.Sprintf("%d/%s", i, rel))
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				if os.IsNotExist(err) {
					return nil
				}
				return err
			}
			sum := sha256.Sum256(b)
			out = append(out, fmt.Sprintf("%d/%s %s", i, rel, hex.EncodeToString(sum[:8])))
			return nil
		})
		Expect(err).NotTo(HaveOccurred())
	}
	return out
}

// filesNaming lists the files under dirs whose name or content holds id:
// an index entry, a temp file, a state file of the attachment.
func filesNaming(dirs []string, id string) []string {
	GinkgoHelper()
	var out []string
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) {
					return nil
				}
				return err
			}
			if d.IsDir() {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				if os.IsNotExist(err) {
					return nil
				}
				return err
			}
			if strings.Contains(p, id) || strings.Contains(string(b), id) {
				shown := fmt.Sprintf("%q", b)
				if len(b) > 200 {
					shown = fmt.Sprintf("(%d bytes)", len(b))
				}
				out = append(out, fmt.Sprintf("file naming the attachment: %s %s", p, shown))
			}
			return nil
		})
		Expect(err).NotTo(HaveOccurred())
	}
	return out
}

// counters matches packet and byte counts as iptables-save and nft print
// them: traffic the kernel itself sends (IPv6 router solicitations) moves
// them.
var counters = regexp.MustCompile(`\[\d+:\d+\]|packets \d+ bytes \d+`)

// rules is n's netfilter state as nft prints it, and, when iptables is the
// legacy (x_tables) kind that nft cannot see, as iptables-save and
// ip6tables-save print it; without comment lines and counters.
func rules(n *ns.NetNS) []string {
	GinkgoHelper()
	dumps := [][]string{{"nft", "list", "ruleset"}}
	if !iptablesIsNFT() {
		dumps = append(dumps, []string{"iptables-save"}, []string{"ip6tables-save"})
	}
	var out []string
	for _, argv := range dumps {
		for _, l := range strings.Split(testutil.NetfilterOutput(n, argv...), "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "#") || strings.TrimSpace(l) == "" {
				continue
			}
			out = append(out, counters.ReplaceAllString(l, "0"))
		}
	}
	return out
}

// iptablesIsNFT reports whether iptables here is iptables-nft, whose rules
// live in nf_tables and so show in `nft list ruleset`.
var iptablesIsNFT = sync.OnceValue(func() bool {
	out, err := exec.Command("iptables", "-V").Output()
	return err == nil && strings.Contains(string(out), "nf_tables")
})

// render turns a snapshot into lines, one per item, each prefixed with
// what it is, so two snapshots compare as text (lineDiff).
func render(s testutil.Snapshot, extraNames []string) []string {
	var out []string
	add := func(kind string, items []string) {
		for _, it := range items {
			out = append(out, kind+": "+it)
		}
	}
	add("host link", s.HostLinks)
	add("container link", s.ContLinks)
	add("host addr", s.HostAddrs)
	add("container addr", s.ContAddrs)
	add("host route", s.HostRoutes)
	add("container route", s.ContRoutes)
	add("rule", s.Rules)
	add("reservation", s.Files)
	for i, items := range s.Extra {
		add(extraNames[i], items)
	}
	return out
}

// lineDiff lists the lines only in want (-) and only in got (+).
func lineDiff(want, got []string) string {
	var b strings.Builder
	for _, l := range want {
		if !slices.Contains(got, l) {
			b.WriteString("  - " + l + "\n")
		}
	}
	for _, l := range got {
		if !slices.Contains(want, l) {
			b.WriteString("  + " + l + "\n")
		}
	}
	return b.String()
}
