package hostport

import (
	"net"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// On iptables-nft, portmap's Check reads the nat chains over netlink
// (checkNFT) and starts iptables-save only when something is missing or
// cannot be encoded. It must accept exactly what the iptables-save path
// accepts.
var _ = Describe("iptables-nft portmap Check over netlink", func() {
	opts := portMapOpts
	pm := func(m *iptables.Runner) *iptablesPortMap { return &iptablesPortMap{m: m} }

	// natRules lists n's nat rules that are a's or shared, per tool: not
	// the other attachment's (ctr-b).
	natRules := func(n *ns.NetNS, a PortMapOptions) map[string][]string {
		GinkgoHelper()
		out := map[string][]string{}
		for _, tool := range []string{"iptables-nft", "ip6tables-nft"} {
			for _, l := range strings.Split(testutil.NetfilterOutput(n, tool+"-save", "-t", "nat"), "\n") {
				if strings.HasPrefix(l, "-A ") && strings.Contains(l, "CNI-") && !strings.Contains(l, pmChain(netfilter.Owner{Network: "n", ContainerID: "ctr-b"})) {
					out[tool] = append(out[tool], l)
				}
			}
		}
		return out
	}

	DescribeTable("agrees with iptables-save, rule by rule",
		func(snat bool, mappings []PortMapping, ips ...string) {
			n := testutil.NewNS()
			a := opts("ctr-a", snat, mappings, ips...)
			b := opts("ctr-b", snat, manyMappings(2, 30000), "10.1.0.6", "fd00:1::6")
			for _, o := range []PortMapOptions{b, a} {
				Expect(nftest.In(n, func() error { return newIPTablesPortMap().Setup(o) })).To(Succeed())
			}
			nftest.DeleteEach(n, "nat", natRules(n, a), func(m *iptables.Runner) error { return pm(m).Check(a) })
		},
		Entry("snat, dual stack, tcp and udp, one with a host IP", true,
			[]PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"},
				{HostPort: 53, ContainerPort: 5353, Protocol: "udp", HostIP: net.ParseIP("192.168.1.1")}},
			"10.1.0.5", "fd00:1::5"),
		Entry("no snat, IPv4", false, []PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}}, "10.1.0.5"),
		Entry("20 ports: two multiport entries", true, manyMappings(20, 20000), "10.1.0.5"),
	)

	It("asks iptables-save about a mapping it cannot encode (sctp), and passes as it does", func() {
		n := testutil.NewNS()
		a := opts("ctr-a", true, []PortMapping{{HostPort: 9000, ContainerPort: 90, Protocol: "sctp"}}, "10.1.0.5")
		Expect(nftest.In(n, func() error { return newIPTablesPortMap().Setup(a) })).To(Succeed())
		var calls []string
		Expect(nftest.In(n, func() error { return pm(&iptables.Runner{Variant: "nft", Run: nftest.CountingRun(&calls)}).Check(a) })).To(Succeed())
		Expect(calls).To(Equal([]string{"iptables-nft-save"}))
	})
})

func TestIPTSpecExprsRefuses(t *testing.T) {
	for _, spec := range []string{
		"-p tcp -m tcp --dport 80 -j DNAT --to-destination 10.1.0.5:80 --random",
		"-p tcp -m tcp --dport 80:90 -j DNAT --to-destination 10.1.0.5:80",
		"-p sctp -m sctp --dport 80 -j X",
		"-p tcp -m multiport --dports 80:90 -j X",
		"-p tcp -m tcp --sport 80 -j X",
		"-s 10.1.0.5/32 -p tcp",
		`-m comment --comment "unterminated -j X`,
		"-p tcp -m tcp --dport 80 -j DNAT --to-destination [fd00::5]:80", // IPv6 target in IPv4
	} {
		if _, ok := iptSpecExprs(nftnl.IPv4, spec); ok {
			t.Errorf("iptSpecExprs(%q) encoded", spec)
		}
	}
	if _, ok := iptSpecExprs(nftnl.IPv4, `-p tcp -m comment --comment "dnat name: \"n\" id: \"c\"" -m multiport --dports 80,443 -j CNI-DN-x`); !ok {
		t.Error("an entry is not encoded")
	}
}

// portMapOpts is the port forwarding of container id (network "n", eth0)
// with mappings, at ips (an IPv4 address in a /24, an IPv6 one in a /64).
func portMapOpts(id string, snat bool, mappings []PortMapping, ips ...string) PortMapOptions {
	o := PortMapOptions{Owner: netfilter.Owner{Network: "n", ContainerID: id, IfName: "eth0"}, SNAT: snat,
		MarkMasqBit: DefaultMarkMasqBit, Mappings: mappings}
	for _, ip := range ips {
		a := net.ParseIP(ip)
		bits := 64
		if a.To4() != nil {
			a, bits = a.To4(), 24
		}
		o.ContainerIPs = append(o.ContainerIPs, net.IPNet{IP: a, Mask: net.CIDRMask(bits, len(a)*8)})
	}
	return o
}
