package netfilter

import (
	"encoding/hex"
	"net"
	"net/netip"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
)

// teardownNFT is Teardown's short way for iptables-nft: the rules that
// iptables-nft-restore made live in nf_tables ("ip nat", "ip6 nat"), where
// netlink reads them and deletes them by handle in one batch, without
// iptables-save and iptables-restore (two processes, about 25 ms).
//
// It acts only when the attachment's chain surely goes as a whole, which
// is the common DEL: every marker in the chain is o's interface and every
// POSTROUTING jump to it is from a marked host, or the chain has no marker
// at all (upstream's layout). That is exactly when planLines would answer
// deleteLines. Anything else (another interface of the container still in
// the chain, a rule it cannot read) answers done=false, and the caller
// reads with iptables-save as before. A batch the kernel refuses (the
// ruleset moved under it) also answers done=false.
func (m *iptablesMasq) teardownNFT(o Owner, f family) (done bool) {
	if m.noNFTDel || !m.isNFTVariant(f) {
		return false
	}
	chain := iptablesChain(o)
	d, err := readNFTChain(f, "POSTROUTING", chain)
	if err != nil {
		return false
	}
	defer d.close()
	ifHex := hex.EncodeToString([]byte(o.IfName))
	hosts := map[netip.Prefix]bool{}
	for _, r := range d.own {
		ri := readIPTRule(r)
		if !strings.Contains(ri.comment, " if: ") {
			continue
		}
		mIf, ok := markerIfName(ri.comment)
		if !ok || mIf != ifHex || !ri.src.IsValid() {
			return false // another interface's marker, or unreadable
		}
		hosts[ri.src] = true
	}
	for _, r := range d.from {
		if ri := readIPTRule(r); ri.jump == chain && len(hosts) > 0 && !hosts[ri.src] {
			return false // a jump no marker of o accounts for
		}
	}
	return d.deleteChain()
}

// nftChain is a user chain of an iptables-nft nat table and the rules of
// the chain that jumps to it, read in one generation, with the
// connection to delete them on.
type nftChain struct {
	c         *nftables.Conn
	table     *nftables.Table
	name      string
	from, own []*nftables.Rule
}

// readNFTChain reads chain and from of family f's nat table. A missing
// table or chain (ENOENT) is an error like any other: the callers'
// chainSurelyAbsent has already ruled on absence.
func readNFTChain(f family, from, chain string) (*nftChain, error) {
	c, err := nftables.New(nftables.AsLasting())
	if err != nil {
		return nil, err
	}
	d := &nftChain{c: c, table: &nftables.Table{Name: "nat", Family: nftables.TableFamilyIPv4}, name: chain}
	if f == ipv6 {
		d.table.Family = nftables.TableFamilyIPv6
	}
	type view struct{ from, own []*nftables.Rule }
	v, err := consistent(func() (view, error) {
		fr, err := c.GetRules(d.table, &nftables.Chain{Name: from})
		if err != nil {
			return view{}, err
		}
		own, err := c.GetRules(d.table, &nftables.Chain{Name: chain})
		return view{fr, own}, err
	})
	if err != nil {
		c.CloseLasting()
		return nil, err
	}
	d.from, d.own = v.from, v.own
	return d, nil
}

func (d *nftChain) close() { d.c.CloseLasting() }

// deleteChain deletes, in one batch, every rule of from that jumps to the
// chain, and the chain; false when the kernel refuses the batch (the
// ruleset moved since the read, another jump to it elsewhere).
func (d *nftChain) deleteChain() bool {
	for _, r := range d.from {
		if readIPTRule(r).jump != d.name {
			continue
		}
		if err := d.c.DelRule(r); err != nil {
			return false
		}
	}
	ch := &nftables.Chain{Name: d.name, Table: d.table}
	d.c.FlushChain(ch)
	d.c.DelChain(ch)
	return d.c.Flush() == nil
}

// iptRule is what the netlink teardowns read of a rule iptables-nft made.
type iptRule struct {
	src     netip.Prefix // -s; invalid when absent or negated
	comment string       // -m comment --comment
	jump    string       // -j <user chain>
	// dnat is the address of -j DNAT --to-destination; dnatUnread says
	// the rule has a DNAT target whose address could not be read.
	dnat       net.IP
	dnatUnread bool
}

func readIPTRule(r *nftables.Rule) iptRule {
	var ri iptRule
	srcOff := uint32(12) // struct iphdr saddr
	if r.Table != nil && r.Table.Family == nftables.TableFamilyIPv6 {
		srcOff = 8 // struct ipv6hdr saddr
	}
	loadedSrc, bits := false, -1
	for _, e := range r.Exprs {
		switch e := e.(type) {
		case *expr.Payload:
			loadedSrc = e.Base == expr.PayloadBaseNetworkHeader && e.Offset == srcOff
		case *expr.Bitwise:
			if loadedSrc {
				bits = maskBits(e.Mask)
			}
		case *expr.Cmp:
			if loadedSrc && e.Op == expr.CmpOpEq {
				if a, ok := netip.AddrFromSlice(e.Data); ok {
					if bits < 0 {
						bits = a.BitLen()
					}
					ri.src = netip.PrefixFrom(a, bits)
				}
			}
			loadedSrc, bits = false, -1
		case *expr.Match:
			if c, ok := e.Info.(*xt.Comment); ok && e.Name == "comment" {
				ri.comment = string(*c)
			}
		case *expr.Verdict:
			if e.Kind == expr.VerdictJump {
				ri.jump = e.Chain
			}
		case *expr.Target:
			if e.Name == "DNAT" {
				ri.dnat = dnatAddr(e.Info)
				ri.dnatUnread = ri.dnat == nil
			}
		}
	}
	return ri
}

// dnatAddr is the first address of a DNAT target's range, nil when the
// info is of a kind it does not know.
// It is in the 16-byte form, as net.ParseIP gives the iptables-save path.
func dnatAddr(info xt.InfoAny) net.IP {
	var ip net.IP
	switch i := info.(type) {
	case *xt.NatRange2:
		ip = i.MinIP
	case *xt.NatRange:
		ip = i.MinIP
	case *xt.NatIPv4MultiRangeCompat:
		if len(*i) > 0 {
			ip = (*i)[0].MinIP
		}
	}
	return ip.To16()
}

// maskBits is the prefix length of a netmask, or -1 for one that is not
// a prefix.
func maskBits(mask []byte) int {
	n, done := 0, false
	for _, b := range mask {
		for i := 7; i >= 0; i-- {
			switch set := b&(1<<i) != 0; {
			case set && done:
				return -1
			case set:
				n++
			default:
				done = true
			}
		}
	}
	return n
}

// markerCommentRE reads the interface (in hex) from a marker's comment
// as the kernel holds it, unquoted (iptablesMarkerRE reads it as
// iptables-save prints it).
var markerCommentRE = newLazyRE(`^name: "[^"\\]*" id: "[^"\\]*" if: ((?:[0-9a-f]{2})*)$`)

func markerIfName(comment string) (string, bool) {
	sm := markerCommentRE.FindStringSubmatch(comment)
	if sm == nil {
		return "", false
	}
	return sm[1], true
}
