package nft

import (
	"encoding/binary"
	"net"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/cniforge/plugins/pkg/netfilter/hostport"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// Upstream's nftables backend (v1.5 on) writes rules, not elements, in
// the same table and chains, commented with the container ID:
//
//	hostports        tcp dport 80 dnat to 10.88.0.2:8080
//	hostip_hostports ip daddr 10.99.0.1 tcp dport 81 dnat to 10.88.0.2:8080
//	masquerading     ip saddr 10.88.0.2 ip daddr 10.88.0.2 masquerade
//	                 ip saddr 127.0.0.1 ip daddr 10.88.0.2 masquerade   (IPv4)
//	                 ip saddr 0.0.0.0/0 ... masquerade                   (masqAll)
//
// CHECK of an attachment upstream made reads them (upstreamCovers); DEL
// removes them by comment (TeardownOf).

// upstreamPMRule is what CHECK reads of one of those rules.
type upstreamPMRule struct {
	proto        byte
	dport        int
	saddr, daddr net.IP
	dnatTo       net.IP
	dnatPort     int
	masq         bool
}

func readUpstreamPMRule(r *nftables.Rule, f nftnl.Family) upstreamPMRule {
	var u upstreamPMRule
	regs := map[uint32][]byte{}
	loaded := ""
	protoOff := uint32(9) // IPv4 protocol; IPv6 next header is at 6
	if f == nftnl.IPv6 {
		protoOff = 6
	}
	for _, e := range r.Exprs {
		switch e := e.(type) {
		case *expr.Meta:
			loaded = ""
			if e.Key == expr.MetaKeyL4PROTO {
				loaded = "proto"
			}
		case *expr.Payload:
			loaded = ""
			switch {
			case e.Base == expr.PayloadBaseTransportHeader && e.Offset == 2 && e.Len == 2:
				loaded = "dport"
			case e.Base == expr.PayloadBaseNetworkHeader && e.Offset == protoOff && e.Len == 1:
				loaded = "proto"
			case e.Base == expr.PayloadBaseNetworkHeader && e.Offset == nftnl.AddrField[f].Saddr:
				loaded = "saddr"
			case e.Base == expr.PayloadBaseNetworkHeader && e.Offset == nftnl.AddrField[f].Daddr:
				loaded = "daddr"
			}
		case *expr.Bitwise:
			if loaded == "saddr" && slices.Max(e.Mask) == 0 {
				loaded = "any" // ip saddr 0.0.0.0/0: masqAll
			}
		case *expr.Cmp:
			if e.Op == expr.CmpOpEq {
				switch {
				case loaded == "proto" && len(e.Data) == 1:
					u.proto = e.Data[0]
				case loaded == "dport" && len(e.Data) == 2:
					u.dport = int(binary.BigEndian.Uint16(e.Data))
				case loaded == "saddr":
					u.saddr = net.IP(slices.Clone(e.Data))
				case loaded == "daddr":
					u.daddr = net.IP(slices.Clone(e.Data))
				}
			}
			loaded = ""
		case *expr.Immediate:
			regs[e.Register] = e.Data
		case *expr.NAT:
			if e.Type == expr.NATTypeDestNAT {
				if a := regs[e.RegAddrMin]; len(a) == int(nftnl.AddrField[f].Len) {
					u.dnatTo = net.IP(slices.Clone(a))
				}
				if p := regs[e.RegProtoMin]; len(p) >= 2 {
					u.dnatPort = int(binary.BigEndian.Uint16(p[:2]))
				}
			}
		case *expr.Masq:
			u.masq = true
		}
	}
	return u
}

// upstreamCovers reports whether upstream's rules in s, commented with
// opts' container ID, forward every mapping of opts in family f (and
// masquerade its hairpin traffic, with snat).
func upstreamCovers(s pmState, opts hostport.PortMapOptions, f nftnl.Family) bool {
	cip := opts.ContainerIP(f)
	rules := map[string][]upstreamPMRule{}
	for chain, rs := range s.upstream {
		for _, r := range rs {
			if nftnl.NftRuleFrom(r).Comment == opts.Owner.ContainerID {
				rules[chain] = append(rules[chain], readUpstreamPMRule(r, f))
			}
		}
	}
	for _, m := range opts.MappingsFor(f) {
		chain := "hostports"
		if m.HostAddr() != nil {
			chain = "hostip_hostports"
		}
		if !slices.ContainsFunc(rules[chain], func(u upstreamPMRule) bool {
			return u.proto == protoNum(m.Protocol) && u.dport == m.HostPort && cip.Equal(u.dnatTo) &&
				u.dnatPort == m.ContainerPort && (m.HostAddr() == nil || m.HostAddr().Equal(u.daddr))
		}) {
			return false
		}
	}
	if opts.SNAT {
		return slices.ContainsFunc(rules["masquerading"], func(u upstreamPMRule) bool {
			return u.masq && (opts.MasqAll || cip.Equal(u.daddr) || cip.Equal(u.saddr))
		})
	}
	return true
}
