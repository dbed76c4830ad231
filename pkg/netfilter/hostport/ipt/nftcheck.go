package ipt

import (
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"

	"github.com/cniforge/plugins/pkg/netfilter/iptables"
	"github.com/cniforge/plugins/pkg/netfilter/iptnft"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// checkNFT is portmap Check's short way for iptables-nft: instead of
// iptables-save (a process, 5-10 ms), it reads over netlink, in one
// generation, which of the nat chains it reads exist, where PREROUTING, OUTPUT and
// POSTROUTING jump (what sharedLines reads, as sharedViewNFT gives it to
// ADD), and the rules of the attachment's chain and of CNI-HOSTPORT-DNAT.
// Each rule Check wants there (r.rules, r.entries) is encoded as
// iptables-nft encodes its spec (iptSpecExprs) and looked for expression
// for expression.
//
// It answers true only when iptables-save would have shown everything
// Check wants. Anything else answers false and Check reads with
// iptables-save, which names what is missing: a missing chain or rule, a
// spec it cannot encode (a shape it does not know), a failed read.
func (p *iptablesPortMap) checkNFT(f nftnl.Family, r pmRules) bool {
	if p.m.NoNFT || !p.m.IsNFTVariant(f) {
		return false
	}
	encode := func(specs []string) ([][]expr.Any, bool) {
		var out [][]expr.Any
		for _, s := range specs {
			e, ok := iptSpecExprs(f, s)
			if !ok {
				return nil, false
			}
			out = append(out, e)
		}
		return out, true
	}
	rules, ok1 := encode(r.rules)
	entries, ok2 := encode(r.entries)
	if !ok1 || !ok2 {
		return false
	}
	type view struct {
		nat       iptables.NatTable
		own, dnat []*nftables.Rule
	}
	fam := f.Nft()
	table := &nftables.Table{Name: "nat", Family: fam}
	var v view
	err := nftnl.WithNFT(func(c *nftnl.NftConn) error {
		var err error
		v, err = nftnl.ConsistentOn(c.Nl, func() (view, error) {
			// The nat chains read below and by sharedLines, each asked
			// for by name: a dump of the family's chains lists every
			// pod's two (masquerade and hostport).
			nat := iptables.NatTable{Chains: map[string]bool{}, Rules: map[string][]string{}}
			for _, name := range []string{r.chain, pmDNATChain, pmSetMarkChain, pmMasqChain, "PREROUTING", "OUTPUT", "POSTROUTING"} {
				there, err := nftnl.NftChainExistsIn(c.Nl, fam, "nat", name)
				if err != nil {
					return view{}, err
				}
				nat.Chains[name] = there
			}
			if !nat.Chains[r.chain] || !nat.Chains[pmDNATChain] {
				return view{nat: nat}, nil
			}
			for _, name := range []string{"PREROUTING", "OUTPUT", "POSTROUTING"} {
				if !nat.Chains[name] {
					continue
				}
				// Only the rules naming a chain sharedLines looks for a
				// jump to (POSTROUTING holds a masquerade jump per pod).
				rs, err := nftnl.RulesWith(c, table, name, []byte(pmDNATChain), []byte(pmMasqChain))
				if err != nil {
					return view{}, err
				}
				// Only the jump, which is all hasJump reads: iptables-save
				// ends every rule with a jump verdict in "-j <chain>".
				for _, rule := range rs {
					if j := iptnft.ReadIPTRule(rule).Jump; j != "" {
						nat.Rules[name] = append(nat.Rules[name], "-j "+j)
					}
				}
			}
			if r.snat && r.ownMark {
				if ok, err := readMarkChains(c.Conn, fam, nat); err != nil || !ok {
					return view{nat: nat}, err // !ok: iptables-save renders them
				}
			}
			own, err := c.GetRules(table, &nftables.Chain{Name: r.chain})
			if err != nil {
				return view{}, err
			}
			// Of CNI-HOSTPORT-DNAT (entries of every pod) only ours:
			// each entry Check wants jumps to r.chain.
			dnat, err := nftnl.RulesWith(c, table, pmDNATChain, []byte(r.chain))
			return view{nat, own, dnat}, err
		})
		return err
	})
	if err != nil || !v.nat.Chains[r.chain] || !v.nat.Chains[pmDNATChain] || v.own == nil || len(r.sharedLines(v.nat)) > 0 {
		return false
	}
	has := func(in []*nftables.Rule, e []expr.Any) bool {
		for _, rule := range in {
			if iptnft.SameExprs(f, rule.Exprs, e) {
				return true
			}
		}
		return false
	}
	for _, e := range rules {
		if !has(v.own, e) {
			return false
		}
	}
	for _, e := range entries {
		if !has(v.dnat, e) {
			return false
		}
	}
	return true
}

// iptSpecExprs encodes a rule spec, as iptables-save prints it, the way
// iptables-nft writes it, for the options portmap's rules use:
//
//	[-s P] [-d P] [-p tcp|udp] [-m tcp|udp --dport N] [-m comment --comment C]
//	[-m multiport --dports N,...] -j DNAT --to-destination A:N | -j <chain>
//
// The protocol, addresses and port become native expressions (in that
// order), the other matches xt matches in the spec's order, then a
// counter and the target. ok is false for anything else.
func iptSpecExprs(f nftnl.Family, spec string) ([]expr.Any, bool) {
	toks, ok := splitSaveSpec(spec)
	if !ok {
		return nil, false
	}
	var native, matches []expr.Any
	var proto string
	var src, dst []expr.Any
	var dport []expr.Any
	var target expr.Any
	next := func(i *int) (string, bool) {
		*i++
		if *i >= len(toks) {
			return "", false
		}
		return toks[*i], true
	}
	for i := 0; i < len(toks); i++ {
		switch toks[i] {
		case "-s", "-d":
			opt := toks[i]
			a, ok := next(&i)
			p := iptnft.ParseCIDR(a)
			if !ok || p == nil {
				return nil, false
			}
			m, ok := iptnft.IptAddrMatch(f, opt == "-d", p, false)
			if !ok || (opt == "-s" && src != nil) || (opt == "-d" && dst != nil) {
				return nil, false
			}
			if opt == "-s" {
				src = m
			} else {
				dst = m
			}
		case "-p":
			v, ok := next(&i)
			num, known := map[string]byte{"tcp": 6, "udp": 17}[v]
			if !ok || !known || proto != "" {
				return nil, false
			}
			proto = v
			native = append(native, &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{num}})
		case "-m":
			name, ok1 := next(&i)
			opt, ok2 := next(&i)
			val, ok3 := next(&i)
			if !ok1 || !ok2 || !ok3 {
				return nil, false
			}
			switch {
			case name == proto && proto != "" && opt == "--dport" && dport == nil:
				port, err := strconv.ParseUint(val, 10, 16)
				if err != nil {
					return nil, false
				}
				dport = []expr.Any{
					&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
					&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, uint16(port))},
				}
			case name == "comment" && opt == "--comment":
				c := xt.Comment(val)
				matches = append(matches, &expr.Match{Name: "comment", Rev: 0, Info: &c})
			case name == "multiport" && opt == "--dports":
				info, ok := multiportDports(val)
				if !ok {
					return nil, false
				}
				matches = append(matches, &expr.Match{Name: "multiport", Rev: 1, Info: &info})
			default:
				return nil, false
			}
		case "-j":
			name, ok := next(&i)
			if !ok {
				return nil, false
			}
			if name != "DNAT" {
				if i != len(toks)-1 {
					return nil, false // a target with options
				}
				// A user chain. Were name a target (MASQUERADE, MARK), the
				// kernel's rule holds an xt target, which this jump never
				// matches: Check then asks iptables-save.
				target = &expr.Verdict{Kind: expr.VerdictJump, Chain: name}
				continue
			}
			opt, ok1 := next(&i)
			to, ok2 := next(&i)
			if !ok1 || !ok2 || opt != "--to-destination" || i != len(toks)-1 {
				return nil, false
			}
			t, ok := dnatTarget(f, to)
			if !ok {
				return nil, false
			}
			target = t
		default:
			return nil, false
		}
	}
	if target == nil {
		return nil, false
	}
	e := append(append(append(append(native, src...), dst...), dport...), matches...)
	return append(e, &expr.Counter{}, target), true
}

// multiportDports is "--dports a,b,..." as struct xt_multiport_v1:
// flags (XT_MULTIPORT_DESTINATION), count, 15 ports, 15 range flags,
// invert; 48 bytes.
func multiportDports(list string) (xt.Unknown, bool) {
	ports := strings.Split(list, ",")
	if len(ports) == 0 || len(ports) > 15 {
		return nil, false
	}
	info := make(xt.Unknown, 48)
	info[0], info[1] = 1, byte(len(ports))
	for i, s := range ports {
		n, err := strconv.ParseUint(s, 10, 16)
		if err != nil {
			return nil, false // a range ("a:b") included
		}
		binary.NativeEndian.PutUint16(info[2+2*i:], uint16(n))
	}
	return info, true
}

// dnatTarget is "-j DNAT --to-destination addr:port" ("[addr]:port" for
// IPv6): the xt DNAT target, rev 2, mapping to one address and one port.
func dnatTarget(f nftnl.Family, to string) (*expr.Target, bool) {
	host, port, err := net.SplitHostPort(to)
	if err != nil || (f == nftnl.IPv6) != strings.HasPrefix(to, "[") {
		return nil, false
	}
	ip := net.ParseIP(host)
	n, err := strconv.ParseUint(port, 10, 16)
	if ip == nil || err != nil || nftnl.FamilyOf(ip) != f {
		return nil, false
	}
	return &expr.Target{Name: "DNAT", Rev: 2, Info: &xt.NatRange2{NatRange: xt.NatRange{
		Flags: uint(xt.NatRangeMapIPs | xt.NatRangeProtoSpecified),
		MinIP: ip, MaxIP: ip, MinPort: uint16(n), MaxPort: uint16(n),
	}}}, true
}

// splitSaveSpec splits a spec as iptables-save prints it into words,
// undoing its quoting (a "..." word with \" and \\ escapes).
func splitSaveSpec(s string) ([]string, bool) {
	var out []string
	for i := 0; i < len(s); {
		if s[i] == ' ' {
			i++
			continue
		}
		var b strings.Builder
		if s[i] == '"' {
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				b.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, false
			}
			i++
		} else {
			for ; i < len(s) && s[i] != ' '; i++ {
				if s[i] == '"' || s[i] == '\\' {
					return nil, false
				}
				b.WriteByte(s[i])
			}
		}
		out = append(out, b.String())
	}
	return out, true
}

// readMarkChains adds to nat, read over netlink, the rules of
// CNI-HOSTPORT-SETMARK and CNI-HOSTPORT-MASQ (where nat says they exist)
// as iptables-save prints what sharedLines looks at. ok is false when a
// rule there is one markRuleSpec cannot render: the caller then reads with
// iptables-save.
func readMarkChains(c *nftables.Conn, fam nftables.TableFamily, nat iptables.NatTable) (ok bool, err error) {
	for _, name := range []string{pmSetMarkChain, pmMasqChain} {
		if !nat.Chains[name] {
			continue
		}
		rs, err := c.GetRules(&nftables.Table{Name: "nat", Family: fam}, &nftables.Chain{Name: name})
		if err != nil {
			return false, err
		}
		for _, r := range rs {
			spec, ok := markRuleSpec(r.Exprs)
			if !ok {
				return false, nil
			}
			nat.Rules[name] = append(nat.Rules[name], spec)
		}
	}
	return true, nil
}

// markRuleSpec renders the shapes iptables-nft gives the rules of
// CNI-HOSTPORT-SETMARK and -MASQ, "[-m comment ...] -j MARK --set-xmark
// V/M" and "-m mark --mark V/M -j MASQUERADE", as iptables-save prints
// them (the comment left out); ok is false for anything else.
func markRuleSpec(exprs []expr.Any) (string, bool) {
	var parts []string
	markLoaded := false
	mask := uint32(0xffffffff)
	for _, e := range exprs {
		switch e := e.(type) {
		case *expr.Counter:
		case *expr.Match:
			if e.Name != "comment" {
				return "", false
			}
		case *expr.Meta:
			if e.Key != expr.MetaKeyMARK || e.SourceRegister {
				return "", false
			}
			markLoaded = true
		case *expr.Bitwise:
			if !markLoaded || len(e.Mask) != 4 {
				return "", false
			}
			mask = binary.NativeEndian.Uint32(e.Mask)
		case *expr.Cmp:
			if !markLoaded || e.Op != expr.CmpOpEq || len(e.Data) != 4 {
				return "", false
			}
			parts = append(parts, fmt.Sprintf("-m mark --mark 0x%x/0x%x", binary.NativeEndian.Uint32(e.Data), mask))
			markLoaded = false
		case *expr.Target:
			switch info, _ := e.Info.(*xt.Unknown); {
			case e.Name == "MARK" && e.Rev == 2 && info != nil && len(*info) >= 8:
				parts = append(parts, fmt.Sprintf("-j MARK --set-xmark 0x%x/0x%x",
					binary.NativeEndian.Uint32((*info)[0:4]), binary.NativeEndian.Uint32((*info)[4:8])))
			case e.Name == "MASQUERADE":
				parts = append(parts, "-j MASQUERADE")
			default:
				return "", false
			}
		case *expr.Masq:
			parts = append(parts, "-j MASQUERADE")
		default:
			return "", false
		}
	}
	if len(parts) == 0 || markLoaded {
		return "", false
	}
	return strings.Join(parts, " "), true
}
