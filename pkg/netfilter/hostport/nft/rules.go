package nft

import (
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/hostport"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// The nftables layout of port forwarding, per family (ip and ip6), in
// upstream's table and chain names. Mappings are map elements, so a
// packet costs one lookup however many mappings there are, and an ADD or
// DEL of 1000 mappings is a few batches of elements (batch.go):
//
//	table ip cni_hostport {
//		map hostports_map        { type inet_proto . inet_service : ipv4_addr . inet_service }
//		map hostip_hostports_map { type ipv4_addr . inet_proto . inet_service : ipv4_addr . inet_service }
//		set hairpin  { type ipv4_addr . ipv4_addr }   # container . container (before issue 22; DEL, CHECK only)
//		set masq_all { type ipv4_addr }               # containers with masqAll
//		set hairpin_nets { type ipv4_addr . ipv4_addr; flags interval }   # container's subnet . container
//		chain prerouting { type nat hook prerouting priority dstnat + 1; fib daddr type local jump hostports_all }
//		chain output     { type nat hook output priority dstnat + 1; fib daddr type local jump hostports_all }
//		chain hostports_all    { jump hostip_hostports; jump hostports }
//		chain hostip_hostports { dnat ip to ip daddr . meta l4proto . th dport map @hostip_hostports_map }
//		chain hostports        { dnat ip to meta l4proto . th dport map @hostports_map }
//		chain masquerading { type nat hook postrouting priority srcnat;
//			ct status dnat ip saddr . ip daddr @hairpin masquerade
//			ct status dnat ip saddr 127.0.0.0/8 masquerade
//			ct status dnat ip daddr @masq_all masquerade }
//		chain masquerading_nets { type nat hook postrouting priority srcnat;
//			ct status dnat ip saddr . ip daddr @hairpin_nets masquerade }
//		chain localnet_guard { type filter hook prerouting priority raw;   # IPv4 only
//			iifname != "lo" ip daddr 127.0.0.0/8 drop }
//	}
//
// Every element carries the comment "<16 hex of SHA-512(network +
// containerID)>, net: <network>, id: <containerID>" (cut to 128 bytes), so
// DEL and GC find their own. Upstream puts one rule per mapping in
// hostports/hostip_hostports/masquerading, commented with the container ID:
// Teardown removes those too. Only traffic to a local address (fib) is
// forwarded (CVE-2025-67499).
const (
	pmTable     = "cni_hostport"
	pmPortsMap  = "hostports_map"
	pmHostIPMap = "hostip_hostports_map"
	pmHairpin   = "hairpin"
	pmMasqAll   = "masq_all"
	// pmHairpinNets holds "container's subnet . container" ranges; its
	// rule lives in a base chain of its own, masquerading_nets, so that a
	// table made before it existed gains both on the next ADD (Setup adds
	// missing chains, not missing rules). pmHairpin stays for DEL and
	// CHECK of what earlier releases added.
	pmHairpinNets   = "hairpin_nets"
	pmMasqNetsChain = "masquerading_nets"
)

var pmUpstreamChains = []string{"hostports", "hostip_hostports", "masquerading"}

func pmTableOf(f nftnl.Family) *nftables.Table {
	return &nftables.Table{Name: pmTable, Family: f.Nft()}
}

func nftPMHash(o netfilter.Owner) string {
	sum := sha512.Sum512([]byte(o.Network + o.ContainerID))
	return hex.EncodeToString(sum[:])[:16]
}

func nftPMComment(o netfilter.Owner) string {
	c := fmt.Sprintf("%s, net: %s, id: %s", nftPMHash(o), o.Network, o.ContainerID)
	if len(c) > netfilter.NftCommentMax {
		c = c[:netfilter.NftCommentMax]
	}
	return c
}

func parseNFTPMComment(c string) (hash, network string, ok bool) {
	hash, rest, found := strings.Cut(c, ", net: ")
	if !found || len(hash) != 16 {
		return "", "", false
	}
	network, _, found = strings.Cut(rest, ", id: ")
	return hash, network, found
}

// pmSets returns the family's maps and sets.
func pmSets(f nftnl.Family) []*nftables.Set {
	t := pmTableOf(f)
	addr := nftables.TypeIPAddr
	if f == nftnl.IPv6 {
		addr = nftables.TypeIP6Addr
	}
	return []*nftables.Set{
		{Table: t, Name: pmPortsMap, IsMap: true, Concatenation: true,
			KeyType:  nftables.MustConcatSetType(nftables.TypeInetProto, nftables.TypeInetService),
			DataType: nftables.MustConcatSetType(addr, nftables.TypeInetService)},
		{Table: t, Name: pmHostIPMap, IsMap: true, Concatenation: true,
			KeyType:  nftables.MustConcatSetType(addr, nftables.TypeInetProto, nftables.TypeInetService),
			DataType: nftables.MustConcatSetType(addr, nftables.TypeInetService)},
		{Table: t, Name: pmHairpin, Concatenation: true, KeyType: nftables.MustConcatSetType(addr, addr)},
		{Table: t, Name: pmMasqAll, KeyType: addr},
		{Table: t, Name: pmHairpinNets, Concatenation: true, Interval: true, KeyType: nftables.MustConcatSetType(addr, addr)},
	}
}

// Registers: NFT_REG_1 holds 16 bytes (32-bit registers 8-11); the parts
// of a concatenation go in consecutive 32-bit registers.
func reg32After(f nftnl.Family, words uint32) uint32 {
	return unix.NFT_REG32_00 + words
}

func addrWords(f nftnl.Family) uint32 { return nftnl.AddrField[f].Len / 4 }

func loadAddr(f nftnl.Family, src bool, reg uint32) expr.Any {
	off := nftnl.AddrField[f].Daddr
	if src {
		off = nftnl.AddrField[f].Saddr
	}
	return &expr.Payload{OperationType: expr.PayloadLoad, DestRegister: reg, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: nftnl.AddrField[f].Len}
}

func loadProtoPort(reg uint32) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg},
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: reg + 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
	}
}

func natFamily(f nftnl.Family) uint32 {
	if f == nftnl.IPv6 {
		return unix.NFPROTO_IPV6
	}
	return unix.NFPROTO_IPV4
}

func dnatVia(f nftnl.Family, set string, key []expr.Any) []expr.Any {
	return append(key,
		&expr.Lookup{SourceRegister: 1, DestRegister: 1, IsDestRegSet: true, SetName: set},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: natFamily(f), RegAddrMin: 1, RegProtoMin: reg32After(f, addrWords(f))})
}

func ctDNAT() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATUS},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(ipsDstNAT), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
	}
}

func localOnly() []expr.Any {
	return []expr.Any{
		&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)},
	}
}

type pmChainDef struct {
	chain *nftables.Chain
	rules [][]expr.Any
}

// pmChains returns the family's chains with their fixed rules.
func pmChains(f nftnl.Family) []pmChainDef {
	t := pmTableOf(f)
	jump := func(c string) []expr.Any { return []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: c}} }
	hostIPKey := append([]expr.Any{loadAddr(f, false, 1)}, loadProtoPort(reg32After(f, addrWords(f)))...)
	hairpin := append(ctDNAT(), loadAddr(f, true, 1), loadAddr(f, false, reg32After(f, addrWords(f))),
		&expr.Lookup{SourceRegister: 1, SetName: pmHairpin}, &expr.Masq{})
	masqAll := append(ctDNAT(), loadAddr(f, false, 1), &expr.Lookup{SourceRegister: 1, SetName: pmMasqAll}, &expr.Masq{})
	hairpinNets := append(ctDNAT(), loadAddr(f, true, 1), loadAddr(f, false, reg32After(f, addrWords(f))),
		&expr.Lookup{SourceRegister: 1, SetName: pmHairpinNets}, &expr.Masq{})
	masq := [][]expr.Any{hairpin}
	if f == nftnl.IPv4 {
		masq = append(masq, append(ctDNAT(), nftnl.MatchAddr(f, true, expr.CmpOpEq, nftnl.MustCIDR("127.0.0.0/8"))[0:3]...))
		masq[1] = append(masq[1], &expr.Masq{})
	}
	masq = append(masq, masqAll)
	defs := []pmChainDef{
		{&nftables.Chain{Name: "hostports", Table: t}, [][]expr.Any{dnatVia(f, pmPortsMap, loadProtoPort(unix.NFT_REG32_00))}},
		{&nftables.Chain{Name: "hostip_hostports", Table: t}, [][]expr.Any{dnatVia(f, pmHostIPMap, hostIPKey)}},
		{&nftables.Chain{Name: "hostports_all", Table: t}, [][]expr.Any{jump("hostip_hostports"), jump("hostports")}},
		{&nftables.Chain{Name: "prerouting", Table: t, Type: nftables.ChainTypeNAT, Hooknum: nftables.ChainHookPrerouting,
			Priority: pmDNATPriority}, [][]expr.Any{append(localOnly(), jump("hostports_all")...)}},
		{&nftables.Chain{Name: "output", Table: t, Type: nftables.ChainTypeNAT, Hooknum: nftables.ChainHookOutput,
			Priority: pmDNATPriority}, [][]expr.Any{append(localOnly(), jump("hostports_all")...)}},
		{&nftables.Chain{Name: "masquerading", Table: t, Type: nftables.ChainTypeNAT, Hooknum: nftables.ChainHookPostrouting,
			Priority: nftables.ChainPriorityNATSource}, masq},
		{&nftables.Chain{Name: pmMasqNetsChain, Table: t, Type: nftables.ChainTypeNAT, Hooknum: nftables.ChainHookPostrouting,
			Priority: nftables.ChainPriorityNATSource}, [][]expr.Any{hairpinNets}},
	}
	if f == nftnl.IPv4 {
		// route_localnet lets a neighbour's packet to 127.0.0.0/8 in:
		// drop it unless it came in on lo (CVE-2020-8558).
		lo := make([]byte, unix.IFNAMSIZ)
		copy(lo, "lo")
		guard := append([]expr.Any{
			&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: lo},
		}, nftnl.MatchAddr(f, false, expr.CmpOpEq, nftnl.MustCIDR("127.0.0.0/8"))...)
		defs = append(defs, pmChainDef{&nftables.Chain{Name: pmGuardNFT, Table: t, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityRaw},
			[][]expr.Any{append(guard, &expr.Verdict{Kind: expr.VerdictDrop})}})
	}
	return defs
}

// pmDNATPriority is prerouting's and output's priority: one after dstnat
// (-100), where kube-proxy's nftables chains and iptables' nat PREROUTING
// and OUTPUT sit. The kernel runs nat chains in priority order until one
// sets up the NAT, and among equal priorities the chain registered last
// first: at dstnat (upstream's priority), a cni_hostport table made after
// kube-proxy's chains would DNAT a NodePort or externalIP equal to a
// hostPort to the pod, and the Service would lose its traffic (as in
// CVE-2019-9946). After them, a Service always wins.
var pmDNATPriority = nftables.ChainPriorityRef(*nftables.ChainPriorityNATDest + 1)

// pmGuardNFT is the IPv4 base chain holding the route_localnet guard.
const pmGuardNFT = "localnet_guard"

func port4(p int) []byte { return []byte{byte(p >> 8), byte(p), 0, 0} }

func addrBytes(f nftnl.Family, ip net.IP) []byte {
	if f == nftnl.IPv4 {
		return ip.To4()
	}
	return ip.To16()
}

// pmElements returns the elements opts adds in family f, per set name.
func pmElements(opts hostport.PortMapOptions, f nftnl.Family) map[string][]nftables.SetElement {
	out := map[string][]nftables.SetElement{}
	cip := opts.ContainerIP(f)
	c := nftPMComment(opts.Owner)
	for _, m := range opts.MappingsFor(f) {
		key := append([]byte{protoNum(m.Protocol), 0, 0, 0}, port4(m.HostPort)...)
		val := append(slices.Clone(addrBytes(f, cip)), port4(m.ContainerPort)...)
		set := pmPortsMap
		if h := m.HostAddr(); h != nil {
			key, set = append(slices.Clone(addrBytes(f, h)), key...), pmHostIPMap
		}
		if !slices.ContainsFunc(out[set], func(e nftables.SetElement) bool { return string(e.Key) == string(key) }) {
			out[set] = append(out[set], nftables.SetElement{Key: key, Val: val, Comment: c})
		}
	}
	if opts.SNAT {
		out[pmHairpinNets] = []nftables.SetElement{hairpinNetsElem(opts, f, c)}
		if opts.MasqAll {
			out[pmMasqAll] = []nftables.SetElement{{Key: slices.Clone(addrBytes(f, cip)), Comment: c}}
		}
	}
	return out
}

// ipsDstNAT is IPS_DST_NAT of the conntrack status bits.
const ipsDstNAT = 1 << 5

// hairpinNetsElem is the hairpin_nets element of opts in family f: from
// anywhere in the container's subnet to the container. (Upstream's
// nftables rule matches the container's own address only, and leaves a
// neighbour on the same bridge without an answer when br_netfilter is
// off: issue 22.)
func hairpinNetsElem(opts hostport.PortMapOptions, f nftnl.Family, comment string) nftables.SetElement {
	cip := addrBytes(f, opts.ContainerIP(f))
	n := opts.HairpinNet(f)
	first, last := addrBytes(f, n.IP), slices.Clone(addrBytes(f, n.IP))
	for i := range last {
		last[i] |= ^n.Mask[len(n.Mask)-len(last)+i]
	}
	return nftables.SetElement{
		Key:     append(slices.Clone(first), cip...),
		KeyEnd:  append(last, cip...),
		Comment: comment,
	}
}

// oldHairpinElem is the hairpin element cniforge added before
// hairpin_nets: container . container.
func oldHairpinElem(opts hostport.PortMapOptions, f nftnl.Family) []byte {
	cip := addrBytes(f, opts.ContainerIP(f))
	return append(slices.Clone(cip), cip...)
}
