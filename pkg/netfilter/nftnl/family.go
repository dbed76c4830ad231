package nftnl

import (
	"net"

	"github.com/google/nftables"
)

// family is an IP address family, for backends that keep one rule set per
// family (iptables has a nat table per family).
type Family int

const (
	IPv4 Family = iota
	IPv6
)

var Families = []Family{IPv4, IPv6}

func (f Family) String() string {
	if f == IPv6 {
		return "IPv6"
	}
	return "IPv4"
}

// nft is the nf_tables family of f's tables ("ip", "ip6"): iptables-nft's,
// and our own per-family ones.
func (f Family) Nft() nftables.TableFamily {
	if f == IPv6 {
		return nftables.TableFamilyIPv6
	}
	return nftables.TableFamilyIPv4
}

func FamilyOf(ip net.IP) Family {
	if ip.To4() != nil {
		return IPv4
	}
	return IPv6
}

// byFamily splits addrs by family, keeping their order, and drops nil
// entries.
func ByFamily(addrs []*net.IPNet) map[Family][]*net.IPNet {
	m := map[Family][]*net.IPNet{}
	for _, a := range addrs {
		if a == nil || a.IP == nil {
			continue
		}
		f := FamilyOf(a.IP)
		m[f] = append(m[f], a)
	}
	return m
}

// hostAddr returns a's address alone: a /32 or /128, 4-byte form for IPv4.
func HostAddr(a *net.IPNet) *net.IPNet {
	if ip4 := a.IP.To4(); ip4 != nil {
		return &net.IPNet{IP: ip4, Mask: net.CIDRMask(32, 32)}
	}
	return &net.IPNet{IP: a.IP.To16(), Mask: net.CIDRMask(128, 128)}
}

// subnetOf returns the network a belongs to (10.1.0.5/24 -> 10.1.0.0/24),
// 4-byte form for IPv4.
func SubnetOf(a *net.IPNet) *net.IPNet {
	ip := a.IP.To4()
	if ip == nil {
		ip = a.IP.To16()
	}
	ones, bits := a.Mask.Size()
	if bits == 0 { // non-canonical mask: treat as a host address
		return HostAddr(a)
	}
	if len(ip) == net.IPv4len && bits == 128 {
		ones -= 96
		bits = 32
	}
	mask := net.CIDRMask(ones, bits)
	return &net.IPNet{IP: ip.Mask(mask), Mask: mask}
}
