package property_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/kernelfeature"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

// hostLocal is dual-stack host-local IPAM with a default route.
const hostLocal = `{"type": "host-local", "dataDir": "$DATA",
  "ranges": [[{"subnet": "10.88.0.0/24"}], [{"subnet": "fd88::/64"}]], "routes": [{"dst": "0.0.0.0/0"}]}`

func bridgeConf(masq string) string {
	return fmt.Sprintf(`{"type": "bridge", "bridge": "propbr0", "isGateway": true%s, "ipam": %s}`, masq, hostLocal)
}

func ptpConf(masq string) string {
	return fmt.Sprintf(`{"type": "ptp"%s, "ipam": %s}`, masq, hostLocal)
}

const (
	masqIPT = `, "ipMasq": true, "ipMasqBackend": "iptables"`
	masqNFT = `, "ipMasq": true, "ipMasqBackend": "nftables"`

	portmapIPT = `{"type": "portmap", "backend": "iptables", "snat": true,
  "runtimeConfig": {"portMappings": [{"hostPort": 18080, "containerPort": 80, "protocol": "tcp"}]}}`
	portmapNFT = `{"type": "portmap", "backend": "nftables", "snat": true,
  "runtimeConfig": {"portMappings": [{"hostPort": 18080, "containerPort": 80, "protocol": "tcp"}]}}`
	bandwidth = `{"type": "bandwidth", "ingressRate": 8000000, "ingressBurst": 800000, "egressRate": 8000000, "egressBurst": 800000}`
	tuning    = `{"type": "tuning", "dataDir": "$TUNING", "mtu": 1400, "mac": "02:00:00:00:00:42", "txQLen": 77,
  "promisc": true, "allmulti": true, "sysctl": {"net.ipv4.conf.IFNAME.arp_filter": "1"}}`
	firewallIPT = `{"type": "firewall", "backend": "iptables"}`
	sbr         = `{"type": "sbr"}`
	vrf         = `{"type": "vrf", "vrfname": "propvrf"}`
)

// masterLink gives the stand-in host a link prop0, a veth whose peer is in
// a namespace of its own: macvlan's and ipvlan's master, host-device's
// device.
func masterLink(e *env) {
	GinkgoHelper()
	Expect(testutil.ConnectNS(
		testutil.VethEnd{NS: e.hostNS, Name: "prop0"},
		testutil.VethEnd{NS: testutil.NewNS(), Name: "peer0"},
	)).To(Succeed())
}

// downDevice is masterLink with prop0 down: host-device's DEL returns a
// device down, whatever its state before ADD (as upstream; ADD brings it up
// for IPAM and nothing a DEL can read records that it was up). Known gap,
// reported in issue 14's closing note.
func downDevice(e *env) {
	GinkgoHelper()
	masterLink(e)
	h := testutil.Handle(e.hostNS)
	l, err := h.LinkByName("prop0")
	Expect(err).NotTo(HaveOccurred())
	Expect(h.LinkSetDown(l)).To(Succeed())
}

// dummyLink gives the stand-in host a dummy link prop0 (kernel lane only).
func dummyLink(e *env) {
	GinkgoHelper()
	la := netlink.NewLinkAttrs()
	la.Name = "prop0"
	Expect(testutil.Handle(e.hostNS).LinkAdd(&netlink.Dummy{LinkAttrs: la})).To(Succeed()) // down, see downDevice
}

// dhcpServer puts dnsmasq behind prop0 and runs the dhcp daemon with its
// state in e.dhcpDir.
func dhcpServer(e *env) {
	GinkgoHelper()
	srvNS := testutil.NewNS()
	Expect(testutil.ConnectNS(
		testutil.VethEnd{NS: e.hostNS, Name: "prop0"},
		testutil.VethEnd{NS: srvNS, Name: "srv0", Addrs: []string{"10.87.0.1/24"}},
	)).To(Succeed())
	dir := filepath.Join(filepath.Dir(e.dataDir), "dnsmasq")
	Expect(os.Mkdir(dir, 0o755)).To(Succeed())
	testutil.StartDnsmasq(srvNS, dir, "srv0", "--dhcp-range=10.87.0.10,10.87.0.50,255.255.255.0,2m")
	testutil.StartDHCPDaemon(e.hostNS, e.sock, e.dhcpDir, filepath.Join(filepath.Dir(e.dataDir), "daemon.log"), "-timeout", "5s")
}

func loDown(n *ns.NetNS) {
	GinkgoHelper()
	h := testutil.Handle(n)
	lo, err := h.LinkByName("lo")
	Expect(err).NotTo(HaveOccurred())
	Expect(h.LinkSetDown(lo)).To(Succeed())
}

// nodeShared is what the first attachment of a network may leave on the
// node after its DEL, each with the reason; expectOnlyShared holds every
// change from a pristine host to one that saw an ADD and a DEL to it. The
// netfilter base chains are in testutil.SharedBase, left out of every
// snapshot.
var nodeShared = []struct {
	match  *regexp.Regexp
	reason string
}{
	{regexp.MustCompile(`^host [a-z ()]+: \+ .*propbr0`),
		"bridge leaves the bridge, its gateway address and their routes and sysctls, as upstream: the network's other attachments use them"},
	{regexp.MustCompile(`^host sysctl: [-+] /proc/sys/net/(ipv4/ip_forward|ipv[46]/conf/[^/]+/forwarding) = `),
		"bridge and ptp turn forwarding on and leave it on, as upstream: it is the node's setting, others rely on it"},
	{regexp.MustCompile(`^host sysctl: [-+] /proc/sys/net/ipv4/conf/all/accept_redirects = `),
		"the kernel turns all.accept_redirects off when forwarding goes on (inet_forward_change)"},
	{regexp.MustCompile(`^file: \+ ipam/propnet/(lock|last_reserved_ip\.\d+) `),
		"host-local's network lock and allocation cursor, as upstream"},
	{regexp.MustCompile(`^file: \+ (ipam|tuning) dir$`),
		"the data folder a plugin (host-local, tuning) makes on its first ADD and keeps, as upstream"},
	{regexp.MustCompile(`^file: \+ ipam/propnet dir$`),
		"host-local's folder of the network, which holds the lock and the cursor, as upstream"},
}

func expectOnlyShared(pristine, after testutil.NodeSnapshot) {
	GinkgoHelper()
	var unexpected []string
next:
	for _, c := range pristine.Changes(after) {
		for _, s := range nodeShared {
			if s.match.MatchString(c) {
				continue next
			}
		}
		unexpected = append(unexpected, c)
	}
	if len(unexpected) > 0 {
		Fail("a first ADD and DEL left more than the network's shared state (- before, + after):\n" + strings.Join(unexpected, "\n"))
	}
}

// volatileFile matches the data files whose content moves with every ADD:
// host-local's allocation cursor. The next ADD starts after the last
// address handed out, so DEL does not wind it back (as upstream); the
// snapshot holds its name only.
var volatileFile = regexp.MustCompile(`^ipam/propnet/last_reserved_ip\.\d+$`)

// hostLocalIndex matches host-local's index (.cniforge/): a cache of the
// reservations that any GC rebuilds into another, equivalent form. It is
// left out of the comparison; noFileNames checks instead that nothing in it
// still names a released attachment.
var hostLocalIndex = regexp.MustCompile(`^file: ipam/propnet/\.cniforge(/| dir$)`)

var _ = Describe("ADD then DEL, and ADD then GC, leave the node as it was", func() {
	entries := []any{propertySpec,
		Entry("loopback", pcase{noNetfilter: true, main: `{"type": "loopback"}`, prepare: loDown}),
		Entry("bridge", pcase{main: bridgeConf("")}),
		Entry("ptp, ipMasq on iptables", pcase{main: ptpConf(masqIPT)}),
		Entry("ptp, ipMasq on nftables", pcase{main: ptpConf(masqNFT)}),
		Entry("ptp with static IPAM", pcase{noNetfilter: true, main: `{"type": "ptp", "ipam": {"type": "static",
  "addresses": [{"address": "10.89.0.2/24", "gateway": "10.89.0.1"}], "routes": [{"dst": "0.0.0.0/0"}]}}`}),
		Entry("macvlan", pcase{noNetfilter: true, main: `{"type": "macvlan", "master": "prop0", "ipam": ` + hostLocal + `}`, setup: masterLink}),
		Entry("macvlan with dhcp IPAM", pcase{noNetfilter: true, main: `{"type": "macvlan", "master": "prop0", "ipam": {"type": "dhcp", "daemonSocketPath": "$SOCK"}}`, setup: dhcpServer}),
		Entry("tap", pcase{noNetfilter: true, main: `{"type": "tap", "ipam": ` + hostLocal + `}`}),
		Entry("host-device on a veth", pcase{noNetfilter: true, main: `{"type": "host-device", "device": "prop0", "ipam": ` + hostLocal + `}`, setup: downDevice, device: "prop0"}),
		Entry("ptp → bandwidth, ingress and egress", pcase{noNetfilter: true, main: ptpConf(""), metas: []string{bandwidth}}),
		Entry("ptp → tuning: sysctl, mac, mtu, txqlen, promisc, allmulti", pcase{noNetfilter: true, main: ptpConf(""), metas: []string{tuning}}),
		Entry("ptp → firewall on iptables", pcase{main: ptpConf(""), metas: []string{firewallIPT}}),
		Entry("ptp → sbr", pcase{noNetfilter: true, main: ptpConf(""), metas: []string{sbr}}),
		// The full chain is also bridge's ipMasq and portmap on each
		// backend: a case of their own would repeat it at a cost in CI time.
		Entry("bridge → portmap → bandwidth → tuning → firewall, iptables", pcase{main: bridgeConf(masqIPT),
			metas: []string{portmapIPT, bandwidth, tuning, firewallIPT}}),
		Entry("bridge → portmap → bandwidth → tuning → firewall, nftables (firewall on iptables)", pcase{main: bridgeConf(masqNFT),
			metas: []string{portmapNFT, bandwidth, tuning, firewallIPT}}),

		Entry("ipvlan", Label(kernelfeature.Label), pcase{noNetfilter: true, main: `{"type": "ipvlan", "master": "prop0", "ipam": ` + hostLocal + `}`,
			setup: masterLink, needs: []kernelfeature.Feature{kernelfeature.IPVlan}}),
		Entry("vlan", Label(kernelfeature.Label), pcase{noNetfilter: true, main: `{"type": "vlan", "master": "prop0", "vlanId": 100, "ipam": ` + hostLocal + `}`,
			setup: masterLink, needs: []kernelfeature.Feature{kernelfeature.VLAN}}),
		Entry("dummy", Label(kernelfeature.Label), pcase{noNetfilter: true, main: `{"type": "dummy", "ipam": ` + hostLocal + `}`,
			needs: []kernelfeature.Feature{kernelfeature.Dummy}}),
		Entry("host-device on a dummy", Label(kernelfeature.Label), pcase{noNetfilter: true, main: `{"type": "host-device", "device": "prop0", "ipam": ` + hostLocal + `}`,
			setup: dummyLink, device: "prop0", needs: []kernelfeature.Feature{kernelfeature.Dummy}}),
		Entry("ptp → vrf", Label(kernelfeature.Label), pcase{noNetfilter: true, main: ptpConf(""), metas: []string{vrf},
			needs: []kernelfeature.Feature{kernelfeature.VRF}}),
	}
	DescribeTable("for", entries...)
})
