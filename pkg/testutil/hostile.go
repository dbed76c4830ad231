package testutil

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/ns"
)

// Files lists everything under dir as "<relative path> <kind> <content
// hash>", sorted: every file, folder and symlink, not only host-local's
// reservations, so a state file written by any plugin (or written outside
// the folder a config named, and landing beside it) shows up. A dir that
// does not exist holds nothing. It reads files only, no namespace.
func Files(dir string) []string {
	ginkgo.GinkgoHelper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			out = append(out, rel+" dir")
		case d.Type()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out = append(out, rel+" symlink "+target)
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			out = append(out, rel+" file "+hex.EncodeToString(sum[:8]))
		}
		return nil
	})
	if os.IsNotExist(err) {
		return nil
	}
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	sort.Strings(out)
	return out
}

// Qdiscs lists the qdiscs of every link in n as "<link> <qdisc>", sorted;
// bandwidth's tbf and ingress qdiscs, and its ifb, show up here.
func Qdiscs(n *ns.NetNS) []string {
	ginkgo.GinkgoHelper()
	h := Handle(n)
	links, err := h.LinkList()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	var out []string
	for _, l := range links {
		qs, err := h.QdiscList(l)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		for _, q := range qs {
			out = append(out, fmt.Sprintf("%s %s %s", l.Attrs().Name, q.Type(), q.Attrs()))
		}
	}
	sort.Strings(out)
	return out
}

// NodeState is, as sorted text lines, what any plugin could leave behind in
// the namespaces given and under the folders given: links (with type,
// master, MTU, MAC and flags), addresses, routes of every table, policy
// rules, qdiscs and every file (see Files). Unlike TakeSnapshot it opens
// one netlink handle per namespace and closes it, so a test may call it
// thousands of times in one spec. Netfilter rules are not in it: dumping
// them execs tools, too slow per case (see NetfilterRuleset).
func NodeState(namespaces []*ns.NetNS, dirs ...string) []string {
	ginkgo.GinkgoHelper()
	var out []string
	for i, n := range namespaces {
		lines, err := nsState(n)
		gomega.Expect(err).NotTo(gomega.HaveOccurred(), "read the state of %s", n.Path())
		for _, l := range lines {
			out = append(out, fmt.Sprintf("ns%d %s", i, l))
		}
	}
	for i, d := range dirs {
		for _, f := range Files(d) {
			out = append(out, fmt.Sprintf("dir%d %s", i, f))
		}
	}
	sort.Strings(out)
	return out
}

func nsState(n *ns.NetNS) ([]string, error) {
	h, err := n.Handle()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		return nil, err
	}
	names := map[int]string{}
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	var out []string
	for _, l := range links {
		a := l.Attrs()
		// Without "running": a veth's carrier comes up by itself a moment
		// after the pair is made.
		out = append(out, fmt.Sprintf("link %s %s master=%s mtu=%d mac=%s flags=%s txqlen=%d alias=%q",
			a.Name, l.Type(), names[a.MasterIndex], a.MTU, a.HardwareAddr, a.Flags&^net.FlagRunning, a.TxQLen, a.Alias))
		addrs, err := h.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			return nil, err
		}
		for _, ad := range addrs {
			if ad.IP.IsLinkLocalUnicast() {
				continue // the kernel adds these by itself
			}
			out = append(out, fmt.Sprintf("addr %s %s", a.Name, ad.IPNet))
		}
		qs, err := h.QdiscList(l)
		if err != nil {
			return nil, err
		}
		for _, q := range qs {
			out = append(out, fmt.Sprintf("qdisc %s %s %s", a.Name, q.Type(), q.Attrs()))
		}
	}
	routes, err := h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, err
	}
	for _, r := range routes {
		if r.Dst != nil && (r.Dst.IP.IsLinkLocalUnicast() || r.Dst.IP.IsMulticast()) {
			continue
		}
		out = append(out, fmt.Sprintf("route table=%d dst=%v gw=%v dev=%s src=%v", r.Table, r.Dst, r.Gw, names[r.LinkIndex], r.Src))
	}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rules, err := h.RuleList(fam)
		if err != nil {
			return nil, err
		}
		for _, r := range rules {
			out = append(out, "rule "+r.String())
		}
	}
	return out, nil
}
