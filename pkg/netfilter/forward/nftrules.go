package forward

import (
	"bytes"
	"fmt"
	"net"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// The nftables layout of the forward filter, a table of our own (upstream
// has no nftables firewall). Everything but the rules in "allow" is shared
// by all attachments and stays after DEL, as the iptables chains do:
//
//	table inet cni_firewall {
//		chain forward {
//			type filter hook forward priority filter - 10; policy accept;
//			meta mark set meta mark | 0x00001000     # tentatively accepted...
//			jump admin                               # ...so an admin accept carries the mark
//			meta mark set meta mark & 0xffffefff     # admin had no verdict
//			jump isolation
//			jump allow
//		}
//		chain admin { }                              # the administrator's; created empty, never changed
//		chain isolation {                            # per bridge with an ingress policy
//			iifname "br1" oifname "br1" drop         # isolated only
//			iifname "br1" oifname != "br1" jump isolation_out
//		}
//		chain isolation_out { oifname "br1" drop }
//		chain allow {                                # per container address, commented with the owner
//			ip daddr 10.88.0.5 ct state established,related meta mark set meta mark | 0x00001000 accept comment "<owner>"
//			ip saddr 10.88.0.5 meta mark set meta mark | 0x00001000 accept comment "<owner>"
//		}
//	}
//
// A drop is final in nftables, so the admin's drops and the isolation
// drops hold whatever other tables say. An accept is not: a packet must
// pass every base chain on the hook, and a drop policy in another table
// (iptables-nft's "ip filter FORWARD", an admin's own chain) still drops
// what we accepted. So every accept of ours also sets the mark bit
// (nftablesMarkBit, default 12), the one thing a later chain can see, and:
//
//   - when iptables-nft's filter FORWARD (ip or ip6) drops by default
//     (policy drop, or a last rule that drops or rejects), Setup inserts at
//     its top the one rule an administrator would otherwise add by hand
//     (iptables-nft shows it as `-m mark --mark 0x1000/0x1000 -m comment
//     --comment "CNI firewall plugin: accepted in inet cni_firewall" -j
//     ACCEPT`), as the iptables backend inserts its jump at the top of
//     FORWARD. It stays, like that jump;
//   - any other drop-policy chain (an admin's "inet filter forward", or
//     iptables-legacy's FORWARD, which netlink cannot see) is the admin's:
//     it lets our traffic through with `meta mark & 0x00001000 ==
//     0x00001000 accept` (README).
//
// The base chain clears the bit after the admin jump, so only our accepts
// leave with it, whatever set it earlier.
const (
	fwdNFTTable     = "cni_firewall"
	fwdNFTBase      = "forward"
	fwdNFTAdmin     = "admin"
	fwdNFTIso       = "isolation"
	fwdNFTIsoOut    = "isolation_out"
	fwdNFTAllow     = "allow"
	fwdNFTPriority  = -10
	fwdDelegComment = "CNI firewall plugin: accepted in inet " + fwdNFTTable
	// DefaultMarkBit is the default nftablesMarkBit.
	DefaultMarkBit = 12
)

var fwdNFTTableRef = &nftables.Table{Name: fwdNFTTable, Family: nftables.TableFamilyINet}

func fwdNFTChain(name string) *nftables.Chain {
	if name != fwdNFTBase {
		return &nftables.Chain{Name: name, Table: fwdNFTTableRef}
	}
	return &nftables.Chain{Name: name, Table: fwdNFTTableRef, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityRef(fwdNFTPriority)}
}

// fwdNFTChains are the regular chains, in the order they are made.
var fwdNFTChains = []string{fwdNFTAdmin, fwdNFTIsoOut, fwdNFTIso, fwdNFTAllow}

// fwdRule is a rule as data: text (nft's syntax, for messages and
// renders), its expressions and its comment. Rules compare by their
// expressions as netlink encodes them, and their comment.
type fwdRule struct {
	text    string
	exprs   []expr.Any
	comment string
}

func (r fwdRule) String() string {
	if r.comment != "" {
		return fmt.Sprintf("%s comment %q", r.text, r.comment)
	}
	return r.text
}

func (r fwdRule) userData() []byte { return nftnl.NftRule{Comment: r.comment}.UserData() }

// key is r's identity: the netlink encoding of its expressions and its
// comment.
func (r fwdRule) key() string { return fwdKey(r.exprs, r.comment) }

func fwdKey(es []expr.Any, comment string) string {
	var b bytes.Buffer
	for _, e := range es {
		data, err := expr.Marshal(unix.NFPROTO_INET, e)
		if err != nil {
			fmt.Fprintf(&b, "%#v", e) // never equal to an encoding
		}
		b.Write(data)
		b.WriteByte(0xff)
	}
	return b.String() + "#" + comment
}

func kernelKey(r *nftables.Rule) string { return fwdKey(r.Exprs, nftnl.NftRuleFrom(r).Comment) }

func markOf(bit int) uint32 { return 1 << uint(bit) }

func u32(v uint32) []byte { return binaryutil.NativeEndian.PutUint32(v) }

// markOr sets bit in the packet mark.
func markOr(bit int) []expr.Any {
	m := markOf(bit)
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: u32(^m), Xor: u32(m)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
	}
}

// markClear clears bit in the packet mark.
func markClear(bit int) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: u32(^markOf(bit)), Xor: u32(0)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
	}
}

func verdict(k expr.VerdictKind, chain string) expr.Any { return &expr.Verdict{Kind: k, Chain: chain} }

// fwdNFTBaseRules is the fixed content of the base chain.
func fwdNFTBaseRules(bit int) []fwdRule {
	m := markOf(bit)
	return []fwdRule{
		{text: fmt.Sprintf("meta mark set meta mark | 0x%08x", m), exprs: markOr(bit)},
		{text: "jump " + fwdNFTAdmin, exprs: []expr.Any{verdict(expr.VerdictJump, fwdNFTAdmin)}},
		{text: fmt.Sprintf("meta mark set meta mark & 0x%08x", ^m), exprs: markClear(bit)},
		{text: "jump " + fwdNFTIso, exprs: []expr.Any{verdict(expr.VerdictJump, fwdNFTIso)}},
		{text: "jump " + fwdNFTAllow, exprs: []expr.Any{verdict(expr.VerdictJump, fwdNFTAllow)}},
	}
}

// fwdNFTAllowRules are r's rules in the allow chain: per address, replies
// to the container and everything from it are accepted, with the mark.
func fwdNFTAllowRules(r ForwardRules) []fwdRule {
	var out []fwdRule
	seen := map[string]bool{}
	c := netfilter.NftComment(r.Owner)
	m := fmt.Sprintf("meta mark set meta mark | 0x%08x accept", markOf(r.markBit()))
	for _, ip := range r.Addrs {
		if ip == nil || seen[ip.String()] {
			continue
		}
		seen[ip.String()] = true
		f := nftnl.FamilyOf(ip)
		host := &net.IPNet{IP: ip, Mask: net.CIDRMask(int(nftnl.AddrField[f].Len)*8, int(nftnl.AddrField[f].Len)*8)}
		if f == nftnl.IPv4 {
			host.IP = ip.To4()
		}
		proto := map[nftnl.Family]string{nftnl.IPv4: "ip", nftnl.IPv6: "ip6"}[f]
		est := append(nftnl.MatchFamily(f), nftnl.MatchAddr(f, false, expr.CmpOpEq, host)...)
		est = append(est,
			&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
				Mask: u32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED), Xor: u32(0)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: u32(0)})
		est = append(append(est, markOr(r.markBit())...), verdict(expr.VerdictAccept, ""))
		src := append(nftnl.MatchFamily(f), nftnl.MatchAddr(f, true, expr.CmpOpEq, host)...)
		src = append(append(src, markOr(r.markBit())...), verdict(expr.VerdictAccept, ""))
		out = append(out,
			fwdRule{text: fmt.Sprintf("%s daddr %s ct state established,related %s", proto, ip, m), exprs: est, comment: c},
			fwdRule{text: fmt.Sprintf("%s saddr %s %s", proto, ip, m), exprs: src, comment: c})
	}
	return out
}

func ifname(key expr.MetaKey, op expr.CmpOp, name string) []expr.Any {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return []expr.Any{&expr.Meta{Key: key, Register: 1}, &expr.Cmp{Op: op, Register: 1, Data: b}}
}

// fwdNFTIsoRules are the bridge's rules in isolation and isolation_out
// for r's ingress policy; none for open.
func fwdNFTIsoRules(r ForwardRules) (iso, out []fwdRule) {
	if r.Policy != IngressSameBridge && r.Policy != IngressIsolated {
		return nil, nil
	}
	br := r.Bridge
	if r.Policy == IngressIsolated {
		e := append(ifname(expr.MetaKeyIIFNAME, expr.CmpOpEq, br), ifname(expr.MetaKeyOIFNAME, expr.CmpOpEq, br)...)
		iso = append(iso, fwdRule{text: fmt.Sprintf("iifname %q oifname %q drop", br, br), exprs: append(e, verdict(expr.VerdictDrop, ""))})
	}
	e := append(ifname(expr.MetaKeyIIFNAME, expr.CmpOpEq, br), ifname(expr.MetaKeyOIFNAME, expr.CmpOpNeq, br)...)
	iso = append(iso, fwdRule{text: fmt.Sprintf("iifname %q oifname != %q jump %s", br, br, fwdNFTIsoOut),
		exprs: append(e, verdict(expr.VerdictJump, fwdNFTIsoOut))})
	out = []fwdRule{{text: fmt.Sprintf("oifname %q drop", br),
		exprs: append(ifname(expr.MetaKeyOIFNAME, expr.CmpOpEq, br), verdict(expr.VerdictDrop, ""))}}
	return iso, out
}

// fwdDelegRule is the rule Setup inserts at the top of a drop-by-default
// iptables-nft FORWARD chain: a packet our table accepted (it carries the
// mark) is accepted there too. The expressions are those iptables-nft
// reads back as "-m mark --mark".
func fwdDelegRule(bit int) fwdRule {
	m := markOf(bit)
	return fwdRule{
		text: fmt.Sprintf("meta mark & 0x%08x == 0x%08x accept", m, m),
		exprs: []expr.Any{
			&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: u32(m), Xor: u32(0)},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: u32(m)},
			verdict(expr.VerdictAccept, ""),
		},
		comment: fwdDelegComment,
	}
}

func (r ForwardRules) markBit() int { return r.MarkBit }

// renderFwdNFT is the table Setup builds on an empty ruleset for r, in the
// format of `nft list table inet cni_firewall` (for tests).
func renderFwdNFT(r ForwardRules) string {
	iso, out := fwdNFTIsoRules(r)
	var b bytes.Buffer
	fmt.Fprintf(&b, "table inet %s {\n", fwdNFTTable)
	chain := func(name, head string, rs []fwdRule) {
		fmt.Fprintf(&b, "\tchain %s {\n%s", name, head)
		for _, r := range rs {
			fmt.Fprintf(&b, "\t\t%s\n", r)
		}
		b.WriteString("\t}\n")
	}
	// In the order Setup makes them, which is the order nft lists them.
	chain(fwdNFTAdmin, "", nil)
	chain(fwdNFTIsoOut, "", out)
	chain(fwdNFTIso, "", iso)
	chain(fwdNFTAllow, "", fwdNFTAllowRules(r))
	chain(fwdNFTBase, "\t\ttype filter hook forward priority filter - 10; policy accept;\n", fwdNFTBaseRules(r.markBit()))
	b.WriteString("}\n")
	return b.String()
}
