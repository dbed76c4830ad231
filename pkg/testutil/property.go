package testutil

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/ns"
)

// LinkAttrs renders every link of n with the attributes a plugin may set
// and must restore, one line per link, sorted. Carrier flags (RUNNING,
// LOWER_UP) are left out: they follow the peer, not the plugin.
func LinkAttrs(n *ns.NetNS) []string {
	ginkgo.GinkgoHelper()
	h := Handle(n)
	links, err := h.LinkList()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	names := map[int]string{}
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	const adminFlags = unix.IFF_UP | unix.IFF_BROADCAST | unix.IFF_LOOPBACK | unix.IFF_POINTOPOINT |
		unix.IFF_NOARP | unix.IFF_PROMISC | unix.IFF_ALLMULTI | unix.IFF_MULTICAST
	var out []string
	for _, l := range links {
		a := l.Attrs()
		master := ""
		if a.MasterIndex != 0 {
			master = names[a.MasterIndex]
			if master == "" {
				master = fmt.Sprint(a.MasterIndex)
			}
		}
		out = append(out, fmt.Sprintf("%s type=%s master=%s mtu=%d txqlen=%d flags=%#x alias=%q mac=%s",
			a.Name, l.Type(), master, a.MTU, a.TxQLen, a.RawFlags&adminFlags, a.Alias, a.HardwareAddr))
	}
	sort.Strings(out)
	return out
}

// AllRoutes renders the routes of every table of n, both families, as
// "table=<n> type=<n> dst=<prefix> gw=<ip> dev=<link> ...", sorted. IPv6
// link-local and multicast destinations are left out, the local table's
// fe80:: entries included: the kernel adds them for every link.
func AllRoutes(n *ns.NetNS) []string {
	ginkgo.GinkgoHelper()
	h := Handle(n)
	routes, err := h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	var out []string
	for _, r := range routes {
		if r.Dst != nil && r.Dst.IP.To4() == nil && (r.Dst.IP.IsLinkLocalUnicast() || r.Dst.IP.IsMulticast()) {
			continue
		}
		dev := ""
		if l, err := h.LinkByIndex(r.LinkIndex); err == nil {
			dev = l.Attrs().Name
		}
		out = append(out, fmt.Sprintf("table=%d type=%d dst=%v gw=%v dev=%s scope=%d src=%v proto=%d prio=%d mtu=%d",
			r.Table, r.Type, r.Dst, r.Gw, dev, r.Scope, r.Src, r.Protocol, r.Priority, r.MTU))
	}
	sort.Strings(out)
	return out
}

// TrafficControl renders the qdiscs of every link of n and the filters
// under each, sorted.
func TrafficControl(n *ns.NetNS) []string {
	ginkgo.GinkgoHelper()
	h := Handle(n)
	links, err := h.LinkList()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	var out []string
	for _, l := range links {
		name := l.Attrs().Name
		qdiscs, err := h.QdiscList(l)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		parents := map[uint32]bool{netlink.HANDLE_ROOT: true, netlink.HANDLE_MIN_INGRESS: true}
		for _, q := range qdiscs {
			qa := q.Attrs()
			// A link's default qdisc (noqueue, or the kernel's choice with no
			// handle) says nothing a plugin did.
			if qa.Handle == 0 && q.Type() != "ingress" && q.Type() != "clsact" {
				continue
			}
			out = append(out, fmt.Sprintf("%s qdisc %s handle=%x parent=%x %+v", name, q.Type(), qa.Handle, qa.Parent, qdiscParams(q)))
			parents[qa.Handle] = true
		}
		for p := range parents {
			filters, err := h.FilterList(l, p)
			if err != nil {
				continue // no qdisc at that parent
			}
			for _, f := range filters {
				fa := f.Attrs()
				out = append(out, fmt.Sprintf("%s filter %s parent=%x handle=%x prio=%d proto=%d", name, f.Type(), fa.Parent, fa.Handle, fa.Priority, fa.Protocol))
			}
		}
	}
	sort.Strings(out)
	return out
}

func qdiscParams(q netlink.Qdisc) any {
	if t, ok := q.(*netlink.Tbf); ok {
		return [3]uint64{t.Rate, uint64(t.Limit), uint64(t.Buffer)}
	}
	return nil
}

// volatileSysctl matches the sysctls that change by themselves (the
// conntrack counter) or cannot be read (stable_secret until set).
var volatileSysctl = regexp.MustCompile(`nf_conntrack_count$|/stable_secret$`)

// NetSysctls reads every readable file under /proc/sys/net inside n, as
// "<path> = <value>", sorted (see volatileSysctl for what is left out).
func NetSysctls(n *ns.NetNS) []string {
	ginkgo.GinkgoHelper()
	var out []string
	gomega.Expect(n.Do(func() error {
		// /proc/sys/net shows the namespace of the thread that reads it.
		return filepath.WalkDir("/proc/sys/net", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || volatileSysctl.MatchString(p) {
				return nil // unreadable entries (write-only, EPERM) say nothing
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil
			}
			out = append(out, p+" = "+strings.Join(strings.Fields(string(b)), " "))
			return nil
		})
	})).To(gomega.Succeed())
	sort.Strings(out)
	return out
}

// DataFiles lists every file under dir as "<dir-relative path> <content>"
// (content quoted, cut at 200 bytes), sorted. A missing dir holds none.
func DataFiles(dir string) []string {
	ginkgo.GinkgoHelper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p) // p is under dir
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSocket != 0 {
			b = nil
		}
		if len(b) > 200 {
			b = b[:200]
		}
		out = append(out, fmt.Sprintf("%s/%s %q", filepath.Base(dir), rel, b))
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	sort.Strings(out)
	return out
}

// NetfilterLines renders n's netfilter state, one self-describing line per
// table, chain, rule, set and map, sorted: each iptables variant's tables
// ("<tool> <table> :<chain> <policy>", "<tool> <table> -A ...") and the
// nftables objects ("nft <kind> <family> <table> <json>"), with counters
// and handles left out. Every dump must succeed (NetfilterOutput).
func NetfilterLines(n *ns.NetNS) []string {
	ginkgo.GinkgoHelper()
	var out []string
	for _, tool := range []string{"iptables-nft-save", "ip6tables-nft-save", "iptables-legacy-save", "ip6tables-legacy-save"} {
		table := ""
		for _, line := range strings.Split(NetfilterOutput(n, tool), "\n") {
			switch {
			case line == "" || line == "COMMIT":
			case strings.HasPrefix(line, "*"):
				table = line[1:]
			case strings.HasPrefix(line, ":"):
				// ":CHAIN POLICY [packets:bytes]": the counters move with traffic.
				out = append(out, fmt.Sprintf("%s %s %s", tool, table, saveCounters.ReplaceAllString(line, "")))
			default:
				out = append(out, fmt.Sprintf("%s %s %s", tool, table, line))
			}
		}
	}
	var dump struct {
		Nftables []map[string]map[string]any `json:"nftables"`
	}
	raw := NetfilterOutput(n, "nft", "-j", "list", "ruleset")
	gomega.Expect(json.Unmarshal([]byte(raw), &dump)).To(gomega.Succeed(), "nft -j list ruleset: %s", raw)
	for _, obj := range dump.Nftables {
		for kind, o := range obj {
			if kind == "metainfo" {
				continue
			}
			delete(o, "handle")
			stripCounters(o)
			fam, _ := o["family"].(string)
			table, _ := o["table"].(string)
			if kind == "table" {
				table, _ = o["name"].(string)
			}
			b, err := json.Marshal(o)
			gomega.Expect(err).NotTo(gomega.HaveOccurred())
			out = append(out, fmt.Sprintf("nft %s %s %s %s", kind, fam, table, b))
		}
	}
	sort.Strings(out)
	return out
}

var saveCounters = regexp.MustCompile(` ?\[\d+:\d+\]`)

// stripCounters zeroes every "counter" statement's packets and bytes.
func stripCounters(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if k == "counter" {
				if c, ok := e.(map[string]any); ok {
					delete(c, "packets")
					delete(c, "bytes")
				}
				continue
			}
			stripCounters(e)
		}
	case []any:
		for _, e := range x {
			stripCounters(e)
		}
	}
}

// SharedBase is the netfilter state the suite deliberately leaves in place
// after the last attachment is gone, as upstream does: shared by every
// attachment of every network on the node, so removing it on one DEL would
// race with another ADD that is about to jump to it. Each entry matches
// whole lines of NetfilterLines; WithoutSharedBase drops them.
var SharedBase = []struct {
	Match *regexp.Regexp
	// Unless, when set, keeps a line Match matches.
	Unless *regexp.Regexp
	Reason string
}{
	{Match: regexp.MustCompile(`^i?p6?tables-(nft|legacy)-save \w+ :(PREROUTING|INPUT|FORWARD|OUTPUT|POSTROUTING) ACCEPT$`),
		Reason: "an iptables table with its built-in chains, made by the first rule in it"},
	{Match: regexp.MustCompile(`^nft (table|chain) ip6? (filter|nat|mangle|raw|security) (\{"family":"ip6?","name":"(filter|nat|mangle|raw|security)"\}|.*"hook":.*"name":"(PREROUTING|INPUT|FORWARD|OUTPUT|POSTROUTING)".*)$`),
		Reason: "the same built-in tables and chains as iptables-nft makes them, seen through nft"},
	{Match: regexp.MustCompile(`^nft (table|chain) inet cni_plugins_masquerade \{.*"name":"(cni_plugins_masquerade|postrouting|masq_checks)"|^nft rule inet cni_plugins_masquerade \{"chain":"postrouting",`),
		Reason: "ipMasq on nftables: the table, its postrouting base chain (multicast return, goto masq_checks) and the empty masq_checks chain, as upstream's nftables masquerade"},
	{Match: regexp.MustCompile(`^i?p6?tables-\S+ (nat|raw) (:CNI-HOSTPORT-(DNAT|SETMARK|MASQ|GUARD) -|-A (PREROUTING|OUTPUT|POSTROUTING) .*-j CNI-HOSTPORT-(DNAT|MASQ|GUARD)|-A CNI-HOSTPORT-(SETMARK|MASQ|GUARD) .*)$`),
		Reason: "portmap on iptables: CNI-HOSTPORT-DNAT/SETMARK/MASQ and their jumps, as upstream, and our localnet guard chain CNI-HOSTPORT-GUARD"},
	{Match: regexp.MustCompile(`^nft chain ip6? (nat|raw) \{"family":"ip6?","name":"CNI-HOSTPORT-(DNAT|SETMARK|MASQ|GUARD)","table":"(nat|raw)"\}$|^nft rule ip6? (nat|raw) \{"chain":"CNI-HOSTPORT-(SETMARK|MASQ|GUARD)",|^nft rule ip6? (nat|raw) \{"chain":"(PREROUTING|OUTPUT|POSTROUTING)",.*"jump":\{"target":"CNI-HOSTPORT-(DNAT|MASQ|GUARD)"\}`),
		Reason: "the same portmap base chains seen through nft"},
	{Match: regexp.MustCompile(`^nft (table|chain|rule|set|map) ip6? cni_hostport `), Unless: regexp.MustCompile(`"elem":|"comment":`),
		Reason: "portmap on nftables: the cni_hostport tables with their chains, rules, sets and maps, as upstream; an attachment's mappings are elements of the sets and maps (and upstream's commented rules), which stay compared"},
	{Match: regexp.MustCompile(`^i?p6?tables-\S+ filter (:CNI-(FORWARD|ADMIN) -|-A FORWARD -m comment --comment "CNI firewall plugin rules" -j CNI-FORWARD|-A CNI-FORWARD -m comment --comment "CNI firewall plugin admin overrides" -j CNI-ADMIN)$`),
		Reason: "firewall on iptables: CNI-FORWARD, CNI-ADMIN (the admin's own rules go there) and their jumps, as upstream"},
	{Match: regexp.MustCompile(`^nft chain ip6? filter \{"family":"ip6?","name":"CNI-(FORWARD|ADMIN)","table":"filter"\}$|^nft rule ip6? filter \{"chain":"(FORWARD|CNI-FORWARD)","expr":\[\{"xt":\{"name":"comment","type":"match"\}\},\{"counter":\{\}\},\{"jump":\{"target":"CNI-(FORWARD|ADMIN)"\}\}\]`),
		Reason: "the same firewall base chains seen through nft"},
}

// WithoutSharedBase returns lines less those SharedBase matches.
func WithoutSharedBase(lines []string) []string {
	var out []string
next:
	for _, l := range lines {
		for _, b := range SharedBase {
			if b.Match.MatchString(l) && (b.Unless == nil || !b.Unless.MatchString(l)) {
				continue next
			}
		}
		out = append(out, l)
	}
	return out
}
