package portmap_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/kernelfeature"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/meta/portmap"
)

// Two containers on one bridge, as bridge with isGateway, ipMasq and
// hairpinMode leaves them: A (.2) and B (.3) behind veths on pmbr0, which
// holds the gateway address (.1) in the stand-in host.
const (
	brGW4, brA4, brB4 = "10.77.0.1", "10.77.0.2", "10.77.0.3"
	brGW6, brA6, brB6 = "fd77::1", "fd77::2", "fd77::3"
)

type bridgeEnv struct{ host, a, b *ns.NetNS }

// newBridgeEnv makes the bridge and its two containers. brNF sets
// bridge-nf-call-iptables and -ip6tables in the host (per namespace since
// Linux 5.3) to 1, else to 0; without br_netfilter, off is all there is.
func newBridgeEnv(brNF bool) bridgeEnv {
	GinkgoHelper()
	e := bridgeEnv{host: testutil.NewNS(), a: testutil.NewNS(), b: testutil.NewNS()}
	hh := testutil.Handle(e.host)
	la := netlink.NewLinkAttrs()
	la.Name = "pmbr0"
	Expect(hh.LinkAdd(&netlink.Bridge{LinkAttrs: la})).To(Succeed())
	br, err := hh.LinkByName("pmbr0")
	Expect(err).NotTo(HaveOccurred())
	for _, a := range []string{brGW4 + "/24", brGW6 + "/64"} {
		addr, err := netlink.ParseAddr(a)
		Expect(err).NotTo(HaveOccurred())
		addr.Flags = unix.IFA_F_NODAD // test addresses are unique
		Expect(hh.AddrAdd(br, addr)).To(Succeed())
	}
	Expect(hh.LinkSetUp(br)).To(Succeed())
	for _, c := range []struct {
		n       *ns.NetNS
		hostEnd string
		v4, v6  string
	}{{e.a, "pmva", brA4, brA6}, {e.b, "pmvb", brB4, brB6}} {
		Expect(testutil.ConnectNS(
			testutil.VethEnd{NS: e.host, Name: c.hostEnd},
			testutil.VethEnd{NS: c.n, Name: "eth0", Addrs: []string{c.v4 + "/24", c.v6 + "/64"}},
		)).To(Succeed())
		port, err := hh.LinkByName(c.hostEnd)
		Expect(err).NotTo(HaveOccurred())
		Expect(hh.LinkSetMaster(port, br)).To(Succeed())
		Expect(hh.LinkSetHairpin(port, true)).To(Succeed())
		ch := testutil.Handle(c.n)
		for _, gw := range []string{brGW4, brGW6} {
			Expect(ch.RouteAdd(&netlink.Route{Gw: net.ParseIP(gw)})).To(Succeed())
		}
	}
	// bridge's ipMasq rules, made before portmap runs: traffic from a
	// container to its own subnet is ACCEPTed unmasqueraded, the rest
	// masqueraded.
	for _, c := range [][]string{
		{"iptables", "-N", "CNI-bridgemasq"},
		{"iptables", "-A", "CNI-bridgemasq", "-d", "10.77.0.0/24", "-j", "ACCEPT"},
		{"iptables", "-A", "CNI-bridgemasq", "!", "-d", "224.0.0.0/4", "-j", "MASQUERADE"},
		{"iptables", "-A", "POSTROUTING", "-s", brA4 + "/32", "-j", "CNI-bridgemasq"},
		{"iptables", "-A", "POSTROUTING", "-s", brB4 + "/32", "-j", "CNI-bridgemasq"},
		{"ip6tables", "-N", "CNI-bridgemasq"},
		{"ip6tables", "-A", "CNI-bridgemasq", "-d", "fd77::/64", "-j", "ACCEPT"},
		{"ip6tables", "-A", "CNI-bridgemasq", "!", "-d", "ff00::/8", "-j", "MASQUERADE"},
		{"ip6tables", "-A", "POSTROUTING", "-s", brA6 + "/128", "-j", "CNI-bridgemasq"},
		{"ip6tables", "-A", "POSTROUTING", "-s", brB6 + "/128", "-j", "CNI-bridgemasq"},
	} {
		ipt(e.host, append([]string{c[0], "-t", "nat"}, c[1:]...)...)
	}
	Expect(e.host.Do(func() error {
		if err := ip.SetSysctl("net/ipv4/ip_forward", "1"); err != nil {
			return err
		}
		if err := ip.SetSysctl("net/ipv6/conf/all/forwarding", "1"); err != nil {
			return err
		}
		if _, err := os.Stat("/proc/sys/net/bridge/bridge-nf-call-iptables"); err != nil {
			if brNF {
				return fmt.Errorf("br_netfilter is not available here: %w", err)
			}
			return nil // off is what a kernel without br_netfilter does
		}
		v := "0"
		if brNF {
			v = "1"
		}
		for _, k := range []string{"net/bridge/bridge-nf-call-iptables", "net/bridge/bridge-nf-call-ip6tables"} {
			if err := ip.SetSysctl(k, v); err != nil {
				return err
			}
		}
		return nil
	})).To(Succeed())
	return e
}

// prevB is bridge's result for B: its addresses with the bridge's prefix.
func (e bridgeEnv) prevB() json.RawMessage {
	GinkgoHelper()
	b, err := json.Marshal(eth0Result(e.b.Path(), brB4, brGW4, brB6, brGW6))
	Expect(err).NotTo(HaveOccurred())
	return b
}

// Issue 22: A reaches B's published port through the gateway address. The
// DNAT sends the connection back out over the bridge; unless it is
// masqueraded (B's subnet, not only B's own address, as upstream's
// iptables rule matches it), B answers A directly over the bridge, where
// nothing undoes the DNAT when br_netfilter is off, and A drops the answer.
var _ = DescribeTableSubtree("a neighbour on the same bridge reaches a published port through the gateway",
	func(backend string) {
		for _, brNF := range []bool{false, true} {
			for _, gw := range []string{brGW4, brGW6} {
				var decorators []any
				if brNF {
					// br_netfilter may be a module nobody loaded here; the
					// VM lane preloads it.
					decorators = append(decorators, Label(kernelfeature.Label))
				}
				It(fmt.Sprintf("with bridge-nf-call-iptables=%v, to %s, and CHECK and DEL pass", brNF, gw), append(decorators, func() {
					if brNF {
						kernelfeature.Require(kernelfeature.BrNetfilter)
					}
					e := newBridgeEnv(brNF)
					tcpServe(e.b, ":8080", "from-b")
					stdin := confOpts{ver: "1.1.0", backend: backend, prev: e.prevB(),
						mappings: []mapping{{HostPort: 18080, ContainerPort: 8080}}, extra: map[string]any{"snat": true}}.json()
					c := testutil.Call{Command: "ADD", ContainerID: "b", Netns: e.b.Path(), IfName: "eth0", Stdin: stdin}
					Expect(testutil.RunIn(e.host, portmap.New(attach.Hooks{}), c).Err).To(BeNil())

					Expect(tcpGet(e.a, net.JoinHostPort(gw, "18080"))).To(Equal("from-b"), "A, the neighbour")
					Expect(tcpGet(e.b, net.JoinHostPort(gw, "18080"))).To(Equal("from-b"), "B itself (hairpin)")

					c.Command = "CHECK"
					Expect(testutil.RunIn(e.host, portmap.New(attach.Hooks{}), c).Err).To(BeNil())
					c.Command = "DEL"
					Expect(testutil.RunIn(e.host, portmap.New(attach.Hooks{}), c).Err).To(BeNil())
					Expect(forwards(e.host)).To(BeEmpty())
				})...)
			}
		}
	}, backends)
