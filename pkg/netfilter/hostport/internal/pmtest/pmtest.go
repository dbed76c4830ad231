// Package pmtest holds what the tests of hostport's backends share: port
// mappings and options built the same way. Only tests import it.
package pmtest

import (
	"net"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/hostport"
)

// ManyMappings is n tcp mappings of host ports first, first+1, ... to
// container port 80.
func ManyMappings(n, first int) []hostport.PortMapping {
	ms := make([]hostport.PortMapping, n)
	for i := range ms {
		ms[i] = hostport.PortMapping{HostPort: first + i, ContainerPort: 80, Protocol: "tcp"}
	}
	return ms
}

// PortMapOpts is attachment id's options: snat, mappings, and a container
// address per ip (/24 for IPv4, /64 for IPv6), with upstream's mark bit.
func PortMapOpts(id string, snat bool, mappings []hostport.PortMapping, ips ...string) hostport.PortMapOptions {
	o := hostport.PortMapOptions{Owner: netfilter.Owner{Network: "n", ContainerID: id, IfName: "eth0"}, SNAT: snat,
		MarkMasqBit: hostport.DefaultMarkMasqBit, Mappings: mappings}
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

// LiveOpts is a dual-stack attachment with three mappings, one of them
// UDP: the live attachment of the specs of Setup over one (check --repair,
// a second ADD).
func LiveOpts() hostport.PortMapOptions {
	return hostport.PortMapOptions{Owner: netfilter.Owner{Network: "n", ContainerID: "live"}, SNAT: true, MarkMasqBit: hostport.DefaultMarkMasqBit,
		Mappings: []hostport.PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}, {HostPort: 8443, ContainerPort: 443, Protocol: "tcp"},
			{HostPort: 5353, ContainerPort: 53, Protocol: "udp"}},
		ContainerIPs: []net.IPNet{{IP: net.ParseIP("10.1.0.5"), Mask: net.CIDRMask(24, 32)}, {IP: net.ParseIP("fd00:1::5"), Mask: net.CIDRMask(64, 128)}}}
}
