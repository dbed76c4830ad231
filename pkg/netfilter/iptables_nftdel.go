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
	if m.noNFT || !m.isNFTVariant(f) {
		return false
	}
	chain := iptablesChain(o)
	d, err := readNFTChain(f, "nat", "POSTROUTING", chain)
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
	release   func(failed bool)
	failed    bool // a change was refused or left half queued
	table     *nftables.Table
	name      string
	from, own []*nftables.Rule
}

// readNFTChain reads chain and from ("" for none) of family f's table
// (nat, filter). A
// missing table or chain (ENOENT) is an error like any other: the
// callers' chainSurelyAbsent has already ruled on absence.
//
// It holds the process's nftables connection (acquireNFT) until close.
func readNFTChain(f family, table, from, chain string) (*nftChain, error) {
	nc, release, err := acquireNFT()
	if err != nil {
		return nil, err
	}
	c := nc.Conn
	d := &nftChain{c: c, release: release, table: &nftables.Table{Name: table, Family: f.nft()}, name: chain}
	type view struct{ from, own []*nftables.Rule }
	v, err := consistentOn(nc.nl, func() (view, error) {
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
	d.from, d.own = v.from, v.own
	return d, nil
}

func (d *nftChain) close() { d.release(d.failed) }

// deleteChain deletes, in one batch, every rule of from that jumps to the
// chain, and the chain; false when the kernel refuses the batch (the
// ruleset moved since the read, another jump to it elsewhere).
func (d *nftChain) deleteChain() bool {
	for _, r := range d.from {
		if readIPTRule(r).jump != d.name {
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
func (d *nftChain) deleteRules(rules []*nftables.Rule) bool {
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

// teardownNFT is the firewall's iptables Teardown for one family of
// iptables-nft: o's rules in CNI-FORWARD (those carrying its marker
// comment) go by handle over netlink, in one batch, with no process.
// Upstream's rules carry no comment and are told by their exact spec: a
// rule without a comment for one of ips answers done=false, as does a
// refused batch, and Teardown reads with iptables-save.
func (m *iptablesForward) teardownNFT(o Owner, f family, ips []net.IP) (done bool) {
	if m.ipt.noNFT || !m.ipt.isNFTVariant(f) {
		return false
	}
	d, err := readNFTChain(f, "filter", "", fwdChain)
	if err != nil {
		return false
	}
	defer d.close()
	own := iptablesMarkerComment(o)
	var del []*nftables.Rule
	for _, r := range d.own {
		ri := readIPTRule(r)
		if ri.comment == own {
			del = append(del, r)
			continue
		}
		for _, ip := range ips {
			if a, ok := netip.AddrFromSlice(ip); ok && ri.comment == "" &&
				(ri.src.Contains(a.Unmap()) || ri.dst.Contains(a.Unmap())) {
				return false // maybe upstream's rule for this attachment
			}
		}
	}
	return len(del) == 0 || d.deleteRules(del)
}

// iptRule is what the netlink teardowns read of a rule iptables-nft made.
type iptRule struct {
	src     netip.Prefix // -s; invalid when absent or negated
	dst     netip.Prefix // -d, likewise
	comment string       // -m comment --comment
	jump    string       // -j <user chain>
	// dnat is the address of -j DNAT --to-destination; dnatUnread says
	// the rule has a DNAT target whose address could not be read.
	dnat       net.IP
	dnatUnread bool
}

func readIPTRule(r *nftables.Rule) iptRule {
	var ri iptRule
	field := addrField[ipv4]
	if r.Table != nil && r.Table.Family == nftables.TableFamilyIPv6 {
		field = addrField[ipv6]
	}
	srcOff, dstOff := field.saddr, field.daddr
	var loaded *netip.Prefix // the address a cmp compares, if any
	bits := -1
	for _, e := range r.Exprs {
		switch e := e.(type) {
		case *expr.Payload:
			loaded = nil
			if e.Base == expr.PayloadBaseNetworkHeader && e.Offset == srcOff {
				loaded = &ri.src
			} else if e.Base == expr.PayloadBaseNetworkHeader && e.Offset == dstOff {
				loaded = &ri.dst
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
