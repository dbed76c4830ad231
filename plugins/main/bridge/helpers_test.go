package bridge_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	current "github.com/containernetworking/cni/pkg/types/100"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/kernelfeature"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/plugin"
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

// withPrev adds prevResult (stdout of an ADD) to a config.
func withPrev(conf, prev []byte) []byte {
	var m map[string]any
	Expect(json.Unmarshal(conf, &m)).To(Succeed())
	var p map[string]any
	Expect(json.Unmarshal(prev, &p)).To(Succeed())
	m["prevResult"] = p
	b, err := json.Marshal(m)
	Expect(err).NotTo(HaveOccurred())
	return b
}

func runP(hostNS *ns.NetNS, p plugin.Plugin, c testutil.Call) testutil.Output {
	GinkgoHelper()
	var out testutil.Output
	Expect(hostNS.Do(func() (err error) {
		out, err = testutil.Run(p, c)
		return err
	})).To(Succeed())
	return out
}

func run(hostNS *ns.NetNS, c testutil.Call) testutil.Output {
	GinkgoHelper()
	return runP(hostNS, bridge.Plugin, c)
}

func mustAdd(hostNS *ns.NetNS, c testutil.Call) *current.Result {
	GinkgoHelper()
	c.Command = "ADD"
	out := run(hostNS, c)
	Expect(out.Err).To(BeNil())
	res, err := current.NewResult(out.Stdout)
	Expect(err).NotTo(HaveOccurred())
	return res.(*current.Result)
}

func handle(n *ns.NetNS) *netlink.Handle {
	GinkgoHelper()
	h, err := n.Handle()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(h.Close)
	return h
}

// linkNames lists the links of n other than lo.
func linkNames(n *ns.NetNS) []string {
	GinkgoHelper()
	links, err := handle(n).LinkList()
	Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, l := range links {
		if l.Attrs().Name != "lo" {
			names = append(names, l.Attrs().Name)
		}
	}
	return names
}

// addrsOf returns the global addresses of ifName in n, as CIDR strings.
func addrsOf(n *ns.NetNS, ifName string) []string {
	GinkgoHelper()
	h := handle(n)
	l, err := h.LinkByName(ifName)
	Expect(err).NotTo(HaveOccurred())
	addrs, err := h.AddrList(l, netlink.FAMILY_ALL)
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, a := range addrs {
		if a.IP.IsGlobalUnicast() {
			out = append(out, a.IPNet.String())
		}
	}
	return out
}

// reservations lists host-local's reservation files (named by address).
func reservations(dataDir string) []string {
	GinkgoHelper()
	entries, err := os.ReadDir(filepath.Join(dataDir, netName))
	if os.IsNotExist(err) {
		return nil
	}
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, e := range entries {
		if net.ParseIP(e.Name()) != nil {
			out = append(out, e.Name())
		}
	}
	return out
}

// rulesText is every netfilter rule set of n as text: iptables (nft and
// legacy) and nftables.
func rulesText(n *ns.NetNS) string {
	GinkgoHelper()
	var b strings.Builder
	Expect(n.Do(func() error {
		for _, cmd := range [][]string{{"iptables-save"}, {"ip6tables-save"}, {"iptables-legacy-save"}, {"ip6tables-legacy-save"}, {"nft", "list", "ruleset"}} {
			if _, err := exec.LookPath(cmd[0]); err != nil {
				continue
			}
			out, _ := exec.Command(cmd[0], cmd[1:]...).CombinedOutput() // a backend not loaded prints nothing useful
			b.Write(out)
		}
		return nil
	})).To(Succeed())
	return b.String()
}

func setupOutside(hostNS *ns.NetNS) *ns.NetNS {
	GinkgoHelper()
	outside := testutil.NewNS()
	h := handle(hostNS)
	la := netlink.NewLinkAttrs()
	la.Name = "to-outside"
	Expect(h.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(outside.Fd()))})).To(Succeed())
	l, err := h.LinkByName("to-outside")
	Expect(err).NotTo(HaveOccurred())
	Expect(h.AddrAdd(l, mustAddr("10.99.0.1/24"))).To(Succeed())
	Expect(h.LinkSetUp(l)).To(Succeed())
	oh := handle(outside)
	ol, err := oh.LinkByName("eth0")
	Expect(err).NotTo(HaveOccurred())
	Expect(oh.AddrAdd(ol, mustAddr("10.99.0.2/24"))).To(Succeed())
	Expect(oh.LinkSetUp(ol)).To(Succeed())
	// No route back to the container subnet: only masqueraded traffic can
	// be answered.
	return outside
}

func mustAddr(s string) *netlink.Addr {
	a, err := netlink.ParseAddr(s)
	Expect(err).NotTo(HaveOccurred())
	return a
}

// udpPeer listens on port in n, and returns a function that waits for one
// datagram and returns the source address the receiver saw.
func udpPeer(n *ns.NetNS, addr string) func() string {
	GinkgoHelper()
	var conn net.PacketConn
	Expect(n.Do(func() (err error) {
		conn, err = net.ListenPacket("udp4", addr)
		return err
	})).To(Succeed())
	DeferCleanup(conn.Close)
	return func() string {
		buf := make([]byte, 64)
		// A deadline against hanging, not a timing assertion.
		Expect(conn.SetReadDeadline(time.Now().Add(10 * time.Second))).To(Succeed())
		_, from, err := conn.ReadFrom(buf)
		Expect(err).NotTo(HaveOccurred())
		return from.(*net.UDPAddr).IP.String()
	}
}

func sendUDP(n *ns.NetNS, dst string) {
	GinkgoHelper()
	Expect(n.Do(func() error {
		c, err := net.Dial("udp4", dst)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("hello"))
		return err
	})).To(Succeed())
}

// routesOf lists the routes of n as "dst via gw" strings.
func routesOf(n *ns.NetNS) []string {
	GinkgoHelper()
	routes, err := handle(n).RouteList(nil, netlink.FAMILY_ALL)
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, r := range routes {
		dst := "0.0.0.0/0"
		if r.Family == netlink.FAMILY_V6 {
			dst = "::/0"
		}
		if r.Dst != nil {
			dst = r.Dst.String()
		}
		if r.Gw != nil {
			dst += " via " + r.Gw.String()
		}
		out = append(out, dst)
	}
	return out
}

func requireBridgeVLANFiltering() {
	GinkgoHelper()
	kernelfeature.Require(kernelfeature.BridgeVLANFiltering)
}

// portVlans returns the VLANs of a bridge port: id -> "pvid untagged",
// "untagged", "tagged".
func portVlans(n *ns.NetNS, port string) map[uint16]string {
	GinkgoHelper()
	h := handle(n)
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
