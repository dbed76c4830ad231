package ptp_test

import (
	"sort"
	"strings"

	current "github.com/containernetworking/cni/pkg/types/100"
	. "github.com/onsi/ginkgo/v2"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/main/ptp"
)

const (
	netName = "ptp-net"
	subnet4 = "10.1.1.0/24"
	gw4     = "10.1.1.1"
	subnet6 = "fd00:1::/64"
	gw6     = "fd00:1::1"
)

// netOpts shapes the test network config.
type netOpts struct {
	ver       string
	dataDir   string
	dual      bool // add an IPv6 range
	v6only    bool // only the IPv6 range
	ipMasq    bool
	backend   string // ipMasqBackend; "" leaves it out
	mtu       int
	oneIP     bool // a range of one address, so every ADD gets the same one
	routes    []string
	prevRes   []byte // prevResult, raw
	extraKeys string // appended verbatim inside the top-level object
}

func (o netOpts) json() []byte {
	GinkgoHelper()
	r4 := map[string]string{"subnet": subnet4}
	r6 := map[string]string{"subnet": subnet6}
	if o.oneIP {
		r4["rangeStart"], r4["rangeEnd"] = "10.1.1.2", "10.1.1.2"
		r6["rangeStart"], r6["rangeEnd"] = "fd00:1::2", "fd00:1::2"
	}
	var ranges [][]map[string]string
	if !o.v6only {
		ranges = append(ranges, []map[string]string{r4})
	}
	if o.dual || o.v6only {
		ranges = append(ranges, []map[string]string{r6})
	}
	ipamConf := map[string]any{"type": "host-local", "dataDir": o.dataDir, "ranges": ranges}
	var routes []map[string]string
	for _, r := range o.routes {
		routes = append(routes, map[string]string{"dst": r})
	}
	if routes != nil {
		ipamConf["routes"] = routes
	}
	conf := map[string]any{
		"cniVersion": o.ver,
		"name":       netName,
		"type":       "ptp",
		"ipMasq":     o.ipMasq,
		"ipam":       ipamConf,
		"dns":        map[string]any{"nameservers": []string{"10.1.1.53"}},
	}
	if o.backend != "" {
		conf["ipMasqBackend"] = o.backend
	}
	if o.mtu != 0 {
		conf["mtu"] = o.mtu
	}
	return testutil.MarshalConf(conf, o.extraKeys, o.prevRes)
}

// natRules is every rule in n tagged with an owner (comment), and every
// per-attachment iptables chain, from iptables (both families) and nftables,
// sorted. Untagged rules are left out: the built-in tables and chains the
// iptables tools create on first use, and the shared scaffolding of the
// nftables masquerade table, belong to no attachment.
func natRules(n *ns.NetNS) []string {
	GinkgoHelper()
	var out []string
	for _, tool := range []string{"iptables-save", "ip6tables-save"} {
		for _, line := range strings.Split(testutil.NetfilterOutput(n, tool, "-t", "nat"), "\n") {
			if (strings.HasPrefix(line, "-A ") && strings.Contains(line, "comment")) || strings.HasPrefix(line, ":CNI-") {
				out = append(out, tool+" "+line)
			}
		}
	}
	for _, line := range strings.Split(testutil.NetfilterOutput(n, "nft", "list", "ruleset"), "\n") {
		if t := strings.TrimSpace(line); strings.Contains(t, "comment") {
			out = append(out, "nft "+t)
		}
	}
	sort.Strings(out)
	return out
}

// takeSnapshot is everything ptp could leave behind, as text, its NAT
// rules included.
func takeSnapshot(hostNS, contNS *ns.NetNS, dataDir string) testutil.Snapshot {
	GinkgoHelper()
	return testutil.TakeSnapshot(hostNS, contNS, dataDir, func() []string { return natRules(hostNS) })
}

// ptpPlugin is the production descriptor.
var ptpPlugin = ptp.Plugin

// withPrev returns o carrying res (printed in o.ver) as prevResult.
func (o netOpts) withPrev(res *current.Result) netOpts {
	GinkgoHelper()
	o.prevRes = testutil.PrintResult(res, o.ver)
	return o
}
