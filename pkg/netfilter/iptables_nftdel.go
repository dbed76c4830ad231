package netfilter

import (
	"encoding/hex"
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
	c, err := nftables.New(nftables.AsLasting())
	if err != nil {
		return false
	}
	defer c.CloseLasting()
	table := &nftables.Table{Name: "nat", Family: nftables.TableFamilyIPv4}
	if f == ipv6 {
		table.Family = nftables.TableFamilyIPv6
	}
	chain := iptablesChain(o)
	type view struct{ post, own []*nftables.Rule }
	v, err := consistent(func() (view, error) {
		post, err := c.GetRules(table, &nftables.Chain{Name: "POSTROUTING"})
		if err != nil {
			return view{}, err
		}
		own, err := c.GetRules(table, &nftables.Chain{Name: chain})
		return view{post, own}, err
	})
	if err != nil {
		// A missing table or chain (ENOENT) is no answer either: the
		// caller's chainSurelyAbsent has already ruled on that.
		return false
	}
	ifHex := hex.EncodeToString([]byte(o.IfName))
	hosts := map[netip.Prefix]bool{}
	for _, r := range v.own {
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
	var jumps []*nftables.Rule
	for _, r := range v.post {
		ri := readIPTRule(r)
		if ri.jump != chain {
			continue
		}
		if len(hosts) > 0 && !hosts[ri.src] {
			return false // a jump no marker of o accounts for
		}
		jumps = append(jumps, r)
	}
	for _, r := range jumps {
		if err := c.DelRule(r); err != nil {
			return false
		}
	}
	ch := &nftables.Chain{Name: chain, Table: table}
	c.FlushChain(ch)
	c.DelChain(ch)
	return c.Flush() == nil
}

// iptRule is what teardownNFT reads of a rule iptables-nft made.
type iptRule struct {
	src     netip.Prefix // -s; invalid when absent or negated
	comment string       // -m comment --comment
	jump    string       // -j <user chain>
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
		}
	}
	return ri
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
