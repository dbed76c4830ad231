package netfilter

import (
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/filelock"
)

// The nftables layout of port forwarding, per family (ip and ip6), in
// upstream's table and chain names. Mappings are map elements, so a
// packet costs one lookup however many mappings there are, and an ADD or
// DEL of 1000 mappings is one batch of elements:
//
//	table ip cni_hostport {
//		map hostports_map        { type inet_proto . inet_service : ipv4_addr . inet_service }
//		map hostip_hostports_map { type ipv4_addr . inet_proto . inet_service : ipv4_addr . inet_service }
//		set hairpin  { type ipv4_addr . ipv4_addr }   # container . container
//		set masq_all { type ipv4_addr }               # containers with masqAll
//		chain prerouting { type nat hook prerouting priority dstnat; fib daddr type local jump hostports_all }
//		chain output     { type nat hook output priority dstnat; fib daddr type local jump hostports_all }
//		chain hostports_all    { jump hostip_hostports; jump hostports }
//		chain hostip_hostports { dnat ip to ip daddr . meta l4proto . th dport map @hostip_hostports_map }
//		chain hostports        { dnat ip to meta l4proto . th dport map @hostports_map }
//		chain masquerading { type nat hook postrouting priority srcnat;
//			ct status dnat ip saddr . ip daddr @hairpin masquerade
//			ct status dnat ip saddr 127.0.0.0/8 masquerade
//			ct status dnat ip daddr @masq_all masquerade }
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
)

var pmUpstreamChains = []string{"hostports", "hostip_hostports", "masquerading"}

type nftablesPortMap struct{}

func newNFTablesPortMap() *nftablesPortMap { return &nftablesPortMap{} }

func (p *nftablesPortMap) Backend() string { return BackendNFTables }

func (p *nftablesPortMap) Usable() error { return newNFTablesMasq().usable() }

var pmFamilies = map[family]nftables.TableFamily{ipv4: nftables.TableFamilyIPv4, ipv6: nftables.TableFamilyIPv6}

func pmTableOf(f family) *nftables.Table {
	return &nftables.Table{Name: pmTable, Family: pmFamilies[f]}
}

func nftPMHash(o Owner) string {
	sum := sha512.Sum512([]byte(o.Network + o.ContainerID))
	return hex.EncodeToString(sum[:])[:16]
}

func nftPMComment(o Owner) string {
	c := fmt.Sprintf("%s, net: %s, id: %s", nftPMHash(o), o.Network, o.ContainerID)
	if len(c) > nftCommentMax {
		c = c[:nftCommentMax]
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
func pmSets(f family) []*nftables.Set {
	t := pmTableOf(f)
	addr := nftables.TypeIPAddr
	if f == ipv6 {
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
	}
}

// Registers: NFT_REG_1 holds 16 bytes (32-bit registers 8-11); the parts
// of a concatenation go in consecutive 32-bit registers.
func reg32After(f family, words uint32) uint32 {
	return unix.NFT_REG32_00 + words
}

func addrWords(f family) uint32 { return addrField[f].len / 4 }

func loadAddr(f family, src bool, reg uint32) expr.Any {
	off := addrField[f].daddr
	if src {
		off = addrField[f].saddr
	}
	return &expr.Payload{OperationType: expr.PayloadLoad, DestRegister: reg, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: addrField[f].len}
}

func loadProtoPort(reg uint32) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg},
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: reg + 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
	}
}

func natFamily(f family) uint32 {
	if f == ipv6 {
		return unix.NFPROTO_IPV6
	}
	return unix.NFPROTO_IPV4
}

func dnatVia(f family, set string, key []expr.Any) []expr.Any {
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
func pmChains(f family) []pmChainDef {
	t := pmTableOf(f)
	jump := func(c string) []expr.Any { return []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: c}} }
	hostIPKey := append([]expr.Any{loadAddr(f, false, 1)}, loadProtoPort(reg32After(f, addrWords(f)))...)
	hairpin := append(ctDNAT(), loadAddr(f, true, 1), loadAddr(f, false, reg32After(f, addrWords(f))),
		&expr.Lookup{SourceRegister: 1, SetName: pmHairpin}, &expr.Masq{})
	masqAll := append(ctDNAT(), loadAddr(f, false, 1), &expr.Lookup{SourceRegister: 1, SetName: pmMasqAll}, &expr.Masq{})
	masq := [][]expr.Any{hairpin}
	if f == ipv4 {
		masq = append(masq, append(ctDNAT(), matchAddr(f, true, expr.CmpOpEq, mustCIDR("127.0.0.0/8"))[0:3]...))
		masq[1] = append(masq[1], &expr.Masq{})
	}
	masq = append(masq, masqAll)
	defs := []pmChainDef{
		{&nftables.Chain{Name: "hostports", Table: t}, [][]expr.Any{dnatVia(f, pmPortsMap, loadProtoPort(unix.NFT_REG32_00))}},
		{&nftables.Chain{Name: "hostip_hostports", Table: t}, [][]expr.Any{dnatVia(f, pmHostIPMap, hostIPKey)}},
		{&nftables.Chain{Name: "hostports_all", Table: t}, [][]expr.Any{jump("hostip_hostports"), jump("hostports")}},
		{&nftables.Chain{Name: "prerouting", Table: t, Type: nftables.ChainTypeNAT, Hooknum: nftables.ChainHookPrerouting,
			Priority: nftables.ChainPriorityNATDest}, [][]expr.Any{append(localOnly(), jump("hostports_all")...)}},
		{&nftables.Chain{Name: "output", Table: t, Type: nftables.ChainTypeNAT, Hooknum: nftables.ChainHookOutput,
			Priority: nftables.ChainPriorityNATDest}, [][]expr.Any{append(localOnly(), jump("hostports_all")...)}},
		{&nftables.Chain{Name: "masquerading", Table: t, Type: nftables.ChainTypeNAT, Hooknum: nftables.ChainHookPostrouting,
			Priority: nftables.ChainPriorityNATSource}, masq},
	}
	if f == ipv4 {
		// route_localnet lets a neighbour's packet to 127.0.0.0/8 in:
		// drop it unless it came in on lo (CVE-2020-8558).
		lo := make([]byte, unix.IFNAMSIZ)
		copy(lo, "lo")
		guard := append([]expr.Any{
			&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: lo},
		}, matchAddr(f, false, expr.CmpOpEq, mustCIDR("127.0.0.0/8"))...)
		defs = append(defs, pmChainDef{&nftables.Chain{Name: pmGuardNFT, Table: t, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityRaw},
			[][]expr.Any{append(guard, &expr.Verdict{Kind: expr.VerdictDrop})}})
	}
	return defs
}

// pmGuardNFT is the IPv4 base chain holding the route_localnet guard.
const pmGuardNFT = "localnet_guard"

func port4(p int) []byte { return []byte{byte(p >> 8), byte(p), 0, 0} }

func addrBytes(f family, ip net.IP) []byte {
	if f == ipv4 {
		return ip.To4()
	}
	return ip.To16()
}

// pmElements returns the elements opts adds in family f, per set name.
func pmElements(opts PortMapOptions, f family) map[string][]nftables.SetElement {
	out := map[string][]nftables.SetElement{}
	cip := opts.containerIP(f)
	c := nftPMComment(opts.Owner)
	for _, m := range opts.mappings(f) {
		key := append([]byte{protoNum[m.Protocol], 0, 0, 0}, port4(m.HostPort)...)
		val := append(slices.Clone(addrBytes(f, cip)), port4(m.ContainerPort)...)
		set := pmPortsMap
		if h := m.hostIP(); h != nil {
			key, set = append(slices.Clone(addrBytes(f, h)), key...), pmHostIPMap
		}
		if !slices.ContainsFunc(out[set], func(e nftables.SetElement) bool { return string(e.Key) == string(key) }) {
			out[set] = append(out[set], nftables.SetElement{Key: key, Val: val, Comment: c})
		}
	}
	if opts.SNAT {
		out[pmHairpin] = []nftables.SetElement{{Key: append(slices.Clone(addrBytes(f, cip)), addrBytes(f, cip)...), Comment: c}}
		if opts.MasqAll {
			out[pmMasqAll] = []nftables.SetElement{{Key: slices.Clone(addrBytes(f, cip)), Comment: c}}
		}
	}
	return out
}

// pmState is what the kernel holds of one family's table.
type pmState struct {
	chains   map[string]bool
	elems    map[string][]nftables.SetElement
	upstream map[string][]*nftables.Rule // rules of the regular chains with a comment
}

func (p *nftablesPortMap) read(c *nftables.Conn, f family, withRules bool) (pmState, error) {
	return consistent(func() (pmState, error) {
		s := pmState{chains: map[string]bool{}, elems: map[string][]nftables.SetElement{}, upstream: map[string][]*nftables.Rule{}}
		chains, err := c.ListChainsOfTableFamily(pmFamilies[f])
		if err != nil {
			return s, fmt.Errorf("list %s chains: %w", f, nftUnsupported(err))
		}
		for _, ch := range chains {
			if ch.Table != nil && ch.Table.Name == pmTable {
				s.chains[ch.Name] = true
			}
		}
		if len(s.chains) == 0 {
			return s, nil
		}
		sets, err := c.GetSets(pmTableOf(f))
		if err != nil {
			return s, fmt.Errorf("list sets of %s %s: %w", f, pmTable, err)
		}
		for _, set := range sets {
			els, err := c.GetSetElements(set)
			if err != nil {
				return s, fmt.Errorf("list set %s of %s %s: %w", set.Name, f, pmTable, err)
			}
			s.elems[set.Name] = els
		}
		if withRules {
			for _, name := range pmUpstreamChains {
				if !s.chains[name] {
					continue
				}
				rs, err := c.GetRules(pmTableOf(f), &nftables.Chain{Name: name, Table: pmTableOf(f)})
				if err != nil {
					return s, fmt.Errorf("list rules of %s %s %s: %w", f, pmTable, name, err)
				}
				for _, r := range rs {
					if r.UserData != nil {
						s.upstream[name] = append(s.upstream[name], r)
					}
				}
			}
		}
		return s, nil
	})
}

func (p *nftablesPortMap) conn() (*nftables.Conn, error) { return newNFTablesMasq().conn() }

// own returns the elements of set in s owned by hash.
func (s pmState) own(set, hash string) []nftables.SetElement {
	var out []nftables.SetElement
	for _, e := range s.elems[set] {
		if h, _, ok := parseNFTPMComment(e.Comment); ok && h == hash {
			out = append(out, e)
		}
	}
	return out
}

func sameElems(a, b []nftables.SetElement) bool {
	key := func(e nftables.SetElement) string { return string(e.Key) + "=" + string(e.Val) }
	ka, kb := make([]string, len(a)), make([]string, len(b))
	for i := range a {
		ka[i] = key(a[i])
	}
	for i := range b {
		kb[i] = key(b[i])
	}
	slices.Sort(ka)
	slices.Sort(kb)
	return slices.Equal(ka, kb)
}

// pmLockFile serialises the creation of the tables, so that two first ADDs
// do not both add the fixed rules.
const pmLockFile = "/run/cniforge/nft-cni_hostport.lock"

func (p *nftablesPortMap) Setup(opts PortMapOptions) error {
	c, err := p.conn()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	hash := nftPMHash(opts.Owner)
	var fams []family
	for _, f := range families {
		if len(opts.mappings(f)) > 0 {
			fams = append(fams, f)
		}
	}
	states := map[family]pmState{}
	locked := false
	for _, f := range fams {
		s, err := p.read(c, f, false)
		if err != nil {
			return fmt.Errorf("set up nftables port forwards for %s: %w", opts.Owner, err)
		}
		if len(s.chains) < len(pmChains(f)) {
			if !locked { // one flock: a second open of the file would wait for the first
				_ = os.MkdirAll(filepath.Dir(pmLockFile), 0o700) // Lock reports a missing directory
				lock, err := filelock.Lock(pmLockFile, 0o600)
				if err != nil {
					return fmt.Errorf("set up nftables port forwards for %s: %w", opts.Owner, err)
				}
				defer lock.Close()
				locked = true
			}
			if s, err = p.read(c, f, false); err != nil {
				return fmt.Errorf("set up nftables port forwards for %s: %w", opts.Owner, err)
			}
		}
		states[f] = s
	}
	// One batch for both families: all or nothing.
	for _, f := range fams {
		s := states[f]
		c.AddTable(pmTableOf(f))
		sets := map[string]*nftables.Set{}
		for _, set := range pmSets(f) {
			if err := c.AddSet(set, nil); err != nil {
				return fmt.Errorf("set up nftables port forwards for %s: set %s: %w", opts.Owner, set.Name, err)
			}
			sets[set.Name] = set
		}
		for _, def := range pmChains(f) {
			ch := c.AddChain(def.chain)
			if s.chains[def.chain.Name] {
				continue
			}
			for _, r := range def.rules {
				c.AddRule(&nftables.Rule{Table: ch.Table, Chain: ch, Exprs: r})
			}
		}
		want := pmElements(opts, f)
		for _, set := range pmSets(f) {
			have := s.own(set.Name, hash)
			if sameElems(have, want[set.Name]) {
				continue
			}
			if len(have) > 0 {
				if err := setElems(c.SetDeleteElements, sets[set.Name], have); err != nil {
					return err
				}
			}
			if len(want[set.Name]) > 0 {
				if err := setElems(c.SetAddElements, sets[set.Name], want[set.Name]); err != nil {
					return err
				}
			}
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("set up nftables port forwards for %s in %s: %w", opts.Owner, pmTable, err)
	}
	return nil
}

func (p *nftablesPortMap) Teardown(o Owner) ([]net.IP, error) {
	c, err := p.conn()
	if err != nil {
		return nil, err
	}
	defer c.CloseLasting()
	hash := nftPMHash(o)
	var ips []net.IP
	changed := false
	for _, f := range families {
		s, err := p.read(c, f, true)
		if err != nil {
			return ips, fmt.Errorf("tear down nftables port forwards for %s: %w", o, err)
		}
		for _, set := range pmSets(f) {
			own := s.own(set.Name, hash)
			if len(own) == 0 {
				continue
			}
			if set.Name == pmPortsMap || set.Name == pmHostIPMap {
				for _, e := range own {
					ip := net.IP(slices.Clone(e.Val[:addrField[f].len]))
					if !slices.ContainsFunc(ips, ip.Equal) {
						ips = append(ips, ip)
					}
				}
			}
			if err := setElems(c.SetDeleteElements, set, own); err != nil {
				return ips, err
			}
			changed = true
		}
		// Upstream's rules, commented with the container ID.
		for _, rs := range s.upstream {
			for _, r := range rs {
				if nftRuleFrom(r).comment == o.ContainerID {
					if err := c.DelRule(r); err != nil {
						return ips, err
					}
					changed = true
				}
			}
		}
	}
	if !changed {
		return ips, nil
	}
	if err := c.Flush(); err != nil {
		return ips, fmt.Errorf("tear down nftables port forwards for %s in %s: %w", o, pmTable, err)
	}
	return ips, nil
}

func (p *nftablesPortMap) Check(opts PortMapOptions) error {
	c, err := p.conn()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	hash := nftPMHash(opts.Owner)
	var miss []error
	for _, f := range families {
		if len(opts.mappings(f)) == 0 {
			continue
		}
		s, err := p.read(c, f, false)
		if err != nil {
			return fmt.Errorf("check nftables port forwards for %s: %w", opts.Owner, err)
		}
		for _, def := range pmChains(f) {
			if !s.chains[def.chain.Name] {
				miss = append(miss, fmt.Errorf("%w: %s %s chain %s", ErrPortMapMissing, f, pmTable, def.chain.Name))
			}
		}
		for set, want := range pmElements(opts, f) {
			have := s.own(set, hash)
			for _, w := range want {
				if !slices.ContainsFunc(have, func(h nftables.SetElement) bool {
					return string(h.Key) == string(w.Key) && string(h.Val) == string(w.Val)
				}) {
					miss = append(miss, fmt.Errorf("%w: %s %s element %x of %s", ErrPortMapMissing, f, pmTable, w.Key, set))
				}
			}
		}
	}
	if len(miss) > 0 {
		return fmt.Errorf("nftables port forwards of %s: %w", opts.Owner, errors.Join(capMissing(miss)...))
	}
	return nil
}

func (p *nftablesPortMap) GC(network string, keep []Owner) error {
	c, err := p.conn()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	kept := map[string]bool{}
	for _, o := range keep {
		if o.Network == network {
			kept[nftPMHash(o)] = true
		}
	}
	changed := false
	for _, f := range families {
		s, err := p.read(c, f, false)
		if err != nil {
			return fmt.Errorf("gc nftables port forwards of network %q: %w", network, err)
		}
		for _, set := range pmSets(f) {
			var stale []nftables.SetElement
			for _, e := range s.elems[set.Name] {
				if h, nw, ok := parseNFTPMComment(e.Comment); ok && nw == network && !kept[h] {
					stale = append(stale, e)
				}
			}
			if len(stale) > 0 {
				if err := setElems(c.SetDeleteElements, set, stale); err != nil {
					return err
				}
				changed = true
			}
		}
	}
	if !changed {
		return nil
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("gc nftables port forwards of network %q: %w", network, err)
	}
	return nil
}

// ipsDstNAT is IPS_DST_NAT of the conntrack status bits.
const ipsDstNAT = 1 << 5

// pmElemChunk bounds the elements of one netlink message: the element
// list is one nested attribute, whose length field has 16 bits, so 1000
// elements in one message would be cut short without an error.
const pmElemChunk = 200

// setElems queues op (add or delete) for els in messages of at most
// pmElemChunk elements; they stay in the one batch the next Flush sends.
func setElems(op func(*nftables.Set, []nftables.SetElement) error, s *nftables.Set, els []nftables.SetElement) error {
	for chunk := range slices.Chunk(els, pmElemChunk) {
		if err := op(s, chunk); err != nil {
			return fmt.Errorf("set %s: %w", s.Name, err)
		}
	}
	return nil
}
