package iptnft

import (
	"net"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"

	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// nftChain is a user chain of an iptables-nft nat table and the rules of
// the chain that jumps to it, read in one generation, with the
// connection to delete them on.
type nftChain struct {
	c         *nftables.Conn
	release   func(failed bool)
	failed    bool // a change was refused or left half queued
	table     *nftables.Table
	name      string
	From, Own []*nftables.Rule
}

// readNFTChain reads chain and from ("" for none) of family f's table
// (nat, filter). A
// missing table or chain (ENOENT) is an error like any other: the
// callers' chainSurelyAbsent has already ruled on absence.
//
// It holds the process's nftables connection (acquireNFT) until close.
func ReadNFTChain(f nftnl.Family, table, from, chain string) (*nftChain, error) {
	nc, release, err := nftnl.AcquireNFT()
	if err != nil {
		return nil, err
	}
	c := nc.Conn
	d := &nftChain{c: c, release: release, table: &nftables.Table{Name: table, Family: f.Nft()}, name: chain}
	type view struct{ from, own []*nftables.Rule }
	v, err := nftnl.ConsistentOn(nc.Nl, func() (view, error) {
		var fr []*nftables.Rule
		if from != "" {
			var err error
			if fr, err = c.GetRules(d.table, &nftables.Chain{Name: from}); err != nil {
				return view{}, err
			}
		}
		own, err := c.GetRules(d.table, &nftables.Chain{Name: chain})
		return view{fr, own}, err
	})
	if err != nil {
		release(true)
		return nil, err
	}
	d.From, d.Own = v.from, v.own
	return d, nil
}

func (d *nftChain) Close() { d.release(d.failed) }

// deleteChain deletes, in one batch, every rule of from that jumps to the
// chain, and the chain; false when the kernel refuses the batch (the
// ruleset moved since the read, another jump to it elsewhere).
func (d *nftChain) DeleteChain() bool {
	for _, r := range d.From {
		if ReadIPTRule(r).Jump != d.name {
			continue
		}
		if err := d.c.DelRule(r); err != nil {
			d.failed = true
			return false
		}
	}
	ch := &nftables.Chain{Name: d.name, Table: d.table}
	d.c.FlushChain(ch)
	d.c.DelChain(ch)
	if d.c.Flush() != nil {
		d.failed = true
		return false
	}
	return true
}

// deleteRules deletes rules (of the chain) in one batch; false when the
// kernel refuses it.
func (d *nftChain) DeleteRules(rules []*nftables.Rule) bool {
	for _, r := range rules {
		if err := d.c.DelRule(r); err != nil {
			d.failed = true
			return false
		}
	}
	if d.c.Flush() != nil {
		d.failed = true
		return false
	}
	return true
}

// iptRule is what the netlink teardowns read of a rule iptables-nft made.
type iptRule struct {
	Src     netip.Prefix // -s; invalid when absent or negated
	Dst     netip.Prefix // -d, likewise
	Comment string       // -m comment --comment
	Jump    string       // -j <user chain>
	// dnat is the address of -j DNAT --to-destination; dnatUnread says
	// the rule has a DNAT target whose address could not be read.
	Dnat       net.IP
	DnatUnread bool
}

func ReadIPTRule(r *nftables.Rule) iptRule {
	var ri iptRule
	field := nftnl.AddrField[nftnl.IPv4]
	if r.Table != nil && r.Table.Family == nftables.TableFamilyIPv6 {
		field = nftnl.AddrField[nftnl.IPv6]
	}
	srcOff, dstOff := field.Saddr, field.Daddr
	var loaded *netip.Prefix // the address a cmp compares, if any
	bits := -1
	for _, e := range r.Exprs {
		switch e := e.(type) {
		case *expr.Payload:
			loaded = nil
			if e.Base == expr.PayloadBaseNetworkHeader && e.Offset == srcOff {
				loaded = &ri.Src
			} else if e.Base == expr.PayloadBaseNetworkHeader && e.Offset == dstOff {
				loaded = &ri.Dst
			}
		case *expr.Bitwise:
			if loaded != nil {
				bits = maskBits(e.Mask)
			}
		case *expr.Cmp:
			if loaded != nil && e.Op == expr.CmpOpEq {
				if a, ok := netip.AddrFromSlice(e.Data); ok {
					if bits < 0 {
						bits = a.BitLen()
					}
					*loaded = netip.PrefixFrom(a, bits)
				}
			}
			loaded, bits = nil, -1
		case *expr.Match:
			if c, ok := e.Info.(*xt.Comment); ok && e.Name == "comment" {
				ri.Comment = string(*c)
			}
		case *expr.Verdict:
			if e.Kind == expr.VerdictJump {
				ri.Jump = e.Chain
			}
		case *expr.Target:
			if e.Name == "DNAT" {
				ri.Dnat = dnatAddr(e.Info)
				ri.DnatUnread = ri.Dnat == nil
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
