package bridge_test

import (
	"fmt"
	"strings"

	current "github.com/containernetworking/cni/pkg/types/100"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/kernelfeature"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/main/bridge"
)

const netName = "brnet"

// netConf renders a bridge config: keys are extra top-level JSON keys
// (without braces); ipamJSON is the ipam object ("" for none).
func netConf(ver, keys, ipamJSON string) []byte {
	s := fmt.Sprintf(`{"cniVersion": %q, "name": %q, "type": "bridge", "bridge": "cnibr0"`, ver, netName)
	if keys != "" {
		s += ", " + keys
	}
	if ipamJSON != "" {
		s += `, "ipam": ` + ipamJSON
	}
	return []byte(s + "}")
}

func hostLocal(dataDir string, subnets ...string) string {
	var sets []string
	for _, s := range subnets {
		sets = append(sets, fmt.Sprintf(`[{"subnet": %q}]`, s))
	}
	return fmt.Sprintf(`{"type": "host-local", "dataDir": %q, "ranges": [%s]}`, dataDir, strings.Join(sets, ", "))
}

// run runs the bridge plugin in-process inside hostNS.
func run(hostNS *ns.NetNS, c testutil.Call) testutil.Output {
	GinkgoHelper()
	return testutil.RunIn(hostNS, bridge.Plugin, c)
}

// mustAdd runs ADD, which must succeed, and returns its result (these
// configs are of the current spec version).
func mustAdd(hostNS *ns.NetNS, c testutil.Call) *current.Result {
	GinkgoHelper()
	c.Command = "ADD"
	out := testutil.MustRunIn(hostNS, bridge.Plugin, c)
	res, err := current.NewResult(out.Stdout)
	Expect(err).NotTo(HaveOccurred())
	return res.(*current.Result)
}

// rulesText is every netfilter rule set of n as text (testutil's
// NetfilterRuleset: iptables nft and legacy, nftables); a dump tool that
// fails fails the spec, so a negative check cannot pass on empty output.
func rulesText(n *ns.NetNS) string {
	GinkgoHelper()
	return testutil.NetfilterRuleset(n)
}

func mustAddr(s string) *netlink.Addr {
	a, err := netlink.ParseAddr(s)
	Expect(err).NotTo(HaveOccurred())
	return a
}

func requireBridgeVLANFiltering() {
	GinkgoHelper()
	kernelfeature.Require(kernelfeature.BridgeVLANFiltering)
}

// portVlans returns the VLANs of a bridge port: id -> "pvid untagged",
// "untagged", "tagged".
func portVlans(n *ns.NetNS, port string) map[uint16]string {
	GinkgoHelper()
	h := testutil.Handle(n)
	l, err := h.LinkByName(port)
	Expect(err).NotTo(HaveOccurred())
	all, err := h.BridgeVlanList()
	Expect(err).NotTo(HaveOccurred())
	out := map[uint16]string{}
	for _, v := range all[int32(l.Attrs().Index)] {
		switch {
		case v.PortVID() && v.EngressUntag():
			out[v.Vid] = "pvid untagged"
		case v.EngressUntag():
			out[v.Vid] = "untagged"
		default:
			out[v.Vid] = "tagged"
		}
	}
	return out
}

// addBridge adds bridge name through h and returns it as the kernel lists
// it.
func addBridge(h *netlink.Handle, name string) netlink.Link {
	GinkgoHelper()
	la := netlink.NewLinkAttrs()
	la.Name = name
	Expect(h.LinkAdd(&netlink.Bridge{LinkAttrs: la})).To(Succeed())
	br, err := h.LinkByName(name)
	Expect(err).NotTo(HaveOccurred())
	return br
}

// addPort adds veth name (its peer named peer) through h and makes it a
// port of bridge: an attachment other than the spec's.
func addPort(h *netlink.Handle, name, peer, bridge string) {
	GinkgoHelper()
	la := netlink.NewLinkAttrs()
	la.Name = name
	Expect(h.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: peer})).To(Succeed())
	l, err := h.LinkByName(name)
	Expect(err).NotTo(HaveOccurred())
	br, err := h.LinkByName(bridge)
	Expect(err).NotTo(HaveOccurred())
	Expect(h.LinkSetMaster(l, br)).To(Succeed())
}
