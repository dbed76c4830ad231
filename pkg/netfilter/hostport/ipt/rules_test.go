package ipt

import (
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/hostport"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// The hairpin mark rules as upstream writes them (iptables-save's text),
// per prefix and masqAll (issue 22).
func TestPortMapHairpinRules(t *testing.T) {
	m := []hostport.PortMapping{{HostPort: 80, ContainerPort: 8080, Protocol: "tcp"}}
	const mark = " -p tcp -m tcp --dport 80 -j CNI-HOSTPORT-SETMARK"
	for _, tc := range []struct {
		name    string
		addr    net.IPNet
		masqAll bool
		f       nftnl.Family
		want    []string
	}{
		{"IPv4 /24: the subnet, and localhost", net.IPNet{IP: net.ParseIP("10.88.0.2"), Mask: net.CIDRMask(24, 32)}, false, nftnl.IPv4,
			[]string{"-s 10.88.0.0/24" + mark, "-s 127.0.0.1/32" + mark}},
		{"IPv4 /32", net.IPNet{IP: net.ParseIP("10.88.0.2"), Mask: net.CIDRMask(32, 32)}, false, nftnl.IPv4,
			[]string{"-s 10.88.0.2/32" + mark, "-s 127.0.0.1/32" + mark}},
		{"IPv4 /0: no -s, as iptables prints 0.0.0.0/0", net.IPNet{IP: net.ParseIP("10.88.0.2"), Mask: net.CIDRMask(0, 32)}, false, nftnl.IPv4,
			[]string{mark[1:], "-s 127.0.0.1/32" + mark}},
		{"IPv6 /64", net.IPNet{IP: net.ParseIP("fd88::2"), Mask: net.CIDRMask(64, 128)}, false, nftnl.IPv6,
			[]string{"-s fd88::/64" + mark}},
		{"no mask: the address alone", net.IPNet{IP: net.ParseIP("fd88::2")}, false, nftnl.IPv6,
			[]string{"-s fd88::2/128" + mark}},
		{"masqAll: one rule, no -s, no localhost rule", net.IPNet{IP: net.ParseIP("10.88.0.2"), Mask: net.CIDRMask(24, 32)}, true, nftnl.IPv4,
			[]string{mark[1:]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := desiredPortMap(hostport.PortMapOptions{Owner: netfilter.Owner{Network: "n", ContainerID: "c"}, ContainerIPs: []net.IPNet{tc.addr},
				Mappings: m, SNAT: true, MasqAll: tc.masqAll, MarkMasqBit: hostport.DefaultMarkMasqBit}, tc.f)
			var got []string
			for _, s := range r.rules {
				if strings.HasSuffix(s, " -j CNI-HOSTPORT-SETMARK") {
					got = append(got, s)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("mark rules\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}
