package nft

import (
	"fmt"
	"github.com/cniforge/plugins/pkg/netfilter/hostport"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
	"net"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// The fixed rules of the cni_hostport chains (pmChains) are what every
// attachment shares: without prerouting's jump no port forward on the
// node works, whatever elements the maps hold (issue 29). Setup declares a
// chain with its rules only when the chain is missing, so a flushed chain
// (nft flush chain ip cni_hostport prerouting) stays empty unless Setup
// and Check look at the rules too. Both read them here, one chain at a
// time, and compare what a rule does, not how it is encoded: the sets it
// looks up, the chains it jumps to, what it compares addresses with, and
// its NAT, masquerade or drop. A rule another tool wrote back in an
// equivalent form (nft -f of a listing) counts, and so do upstream's
// prerouting and output, which jump to hostip_hostports and hostports
// directly rather than through hostports_all.

// pmRuleSig is what a rule of the table does, for comparing a fixed rule
// with one the kernel holds.
func pmRuleSig(f nftnl.Family, exprs []expr.Any) string {
	var sig []string
	// An address compare: a load of the address or of its first bytes
	// (nft loads one byte for a /8), maybe masked, then equal to a
	// value; written as the prefix it matches.
	var load *expr.Payload
	var mask []byte
	for _, e := range exprs {
		switch e := e.(type) {
		case *expr.Payload:
			load, mask = nil, nil
			if e.Base == expr.PayloadBaseNetworkHeader && e.Len <= nftnl.AddrField[f].Len &&
				(e.Offset == nftnl.AddrField[f].Saddr || e.Offset == nftnl.AddrField[f].Daddr) {
				load = e
				sig = append(sig, fmt.Sprintf("load@%d", e.Offset))
			}
		case *expr.Bitwise:
			// a prefix's mask, between the load and the compare
			if load != nil {
				mask = e.Mask
			}
		case *expr.Cmp:
			if load != nil && e.Op == expr.CmpOpEq && len(e.Data) == int(load.Len) {
				addr := make([]byte, nftnl.AddrField[f].Len)
				bits := 0
				for i, b := range e.Data {
					m := byte(0xff)
					if i < len(mask) {
						m = mask[i]
					}
					addr[i] = b & m
					for ; m&0x80 != 0; m <<= 1 {
						bits++
					}
				}
				sig[len(sig)-1] = fmt.Sprintf("addr@%d=%s/%d", load.Offset, net.IP(addr), bits)
			}
			load, mask = nil, nil
		case *expr.Lookup:
			load = nil
			sig = append(sig, "@"+e.SetName)
		case *expr.Verdict:
			switch e.Kind {
			case expr.VerdictJump, expr.VerdictGoto:
				sig = append(sig, "jump "+e.Chain)
			case expr.VerdictDrop:
				sig = append(sig, "drop")
			}
		case *expr.NAT:
			sig = append(sig, fmt.Sprintf("nat%d", e.Type))
		case *expr.Masq:
			sig = append(sig, "masq")
		default:
			load = nil
		}
	}
	return strings.Join(sig, " ")
}

// pmChainRules reads the rules of each of family f's fixed chains that s
// says exist.
func (p *nftablesPortMap) pmChainRules(c *nftables.Conn, f nftnl.Family, s pmState) (map[string][]*nftables.Rule, error) {
	out := map[string][]*nftables.Rule{}
	for _, def := range pmChains(f) {
		if !s.chains[def.chain.Name] {
			continue
		}
		rs, err := c.GetRules(pmTableOf(f), &nftables.Chain{Name: def.chain.Name, Table: pmTableOf(f)})
		if err != nil {
			return nil, fmt.Errorf("list rules of %s %s %s: %w", f, pmTable, def.chain.Name, err)
		}
		out[def.chain.Name] = rs
	}
	return out, nil
}

// pmReaches returns which of targets chain does not reach through
// jumps within the table (as far as hostports_all).
func pmReaches(f nftnl.Family, rules map[string][]*nftables.Rule, chain string, targets []string) []string {
	reached := map[string]bool{}
	var walk func(string, int)
	walk = func(ch string, depth int) {
		if depth > 3 {
			return
		}
		for _, r := range rules[ch] {
			for _, e := range r.Exprs {
				if v, ok := e.(*expr.Verdict); ok && (v.Kind == expr.VerdictJump || v.Kind == expr.VerdictGoto) && !reached[v.Chain] {
					reached[v.Chain] = true
					walk(v.Chain, depth+1)
				}
			}
		}
	}
	walk(chain, 0)
	var miss []string
	for _, t := range targets {
		if !reached[t] {
			miss = append(miss, t)
		}
	}
	return miss
}

// pmMissingRule is a fixed rule missing from an existing chain.
type pmMissingRule struct {
	chain *nftables.Chain
	exprs []expr.Any
	what  string // for an error: "jump to hostports", "@hairpin_nets masq"
}

// pmMissingFixed returns the fixed rules of the existing chains in rules
// that no rule there does the work of. want, when not nil, limits it to
// the rules an attachment needs (Check); nil is every fixed rule (Setup).
func pmMissingFixed(f nftnl.Family, rules map[string][]*nftables.Rule, want func(chain, sig string) bool) []pmMissingRule {
	var out []pmMissingRule
	for _, def := range pmChains(f) {
		have, exists := rules[def.chain.Name]
		if !exists {
			continue
		}
		switch def.chain.Name {
		case "prerouting", "output":
			// Upstream jumps to the two chains itself: what counts is
			// that they are reached.
			targets := []string{"hostip_hostports", "hostports"}
			if want != nil {
				targets = slices.DeleteFunc(targets, func(t string) bool { return !want(def.chain.Name, "jump "+t) })
			}
			if miss := pmReaches(f, rules, def.chain.Name, targets); len(miss) > 0 {
				out = append(out, pmMissingRule{def.chain, def.rules[0], "jump to " + strings.Join(miss, " and ")})
			}
			continue
		}
		for _, r := range def.rules {
			sig := pmRuleSig(f, r)
			if want != nil && !want(def.chain.Name, sig) {
				continue
			}
			if !slices.ContainsFunc(have, func(h *nftables.Rule) bool { return pmRuleSig(f, h.Exprs) == sig }) {
				out = append(out, pmMissingRule{def.chain, r, sig})
			}
		}
	}
	return out
}

// pmNeeds says which fixed rules opts's forwards in family f depend on,
// by chain and signature (pmRuleSig).
func pmNeeds(opts hostport.PortMapOptions, f nftnl.Family, oldHairpin bool) func(chain, sig string) bool {
	var plain, hostIP bool
	for _, m := range opts.MappingsFor(f) {
		if m.HostAddr() != nil {
			hostIP = true
		} else {
			plain = true
		}
	}
	return func(chain, sig string) bool {
		switch chain {
		case "prerouting", "output":
			return sig == "jump hostports" && plain || sig == "jump hostip_hostports" && hostIP
		case "hostports":
			return plain
		case "hostip_hostports":
			return hostIP
		case "hostports_all":
			return false // pmReaches walks it
		case "masquerading":
			switch {
			case strings.Contains(sig, "@"+pmHairpin+" "):
				return opts.SNAT && oldHairpin
			case strings.Contains(sig, "@"+pmMasqAll+" "):
				return opts.SNAT && opts.MasqAll
			default: // 127.0.0.0/8: localhost to the host port
				return opts.SNAT && f == nftnl.IPv4
			}
		case pmMasqNetsChain:
			return opts.SNAT && !oldHairpin
		}
		// The route_localnet guard is ours alone (upstream makes none):
		// Setup restores it, Check does not ask for it.
		return false
	}
}

// missingFixed returns the fixed rules missing from family f's existing
// chains (s), for Setup to add.
func (p *nftablesPortMap) missingFixed(c *nftables.Conn, f nftnl.Family, s pmState) ([]pmMissingRule, error) {
	if len(s.chains) == 0 {
		return nil, nil
	}
	rules, err := p.pmChainRules(c, f, s)
	if err != nil {
		return nil, err
	}
	return pmMissingFixed(f, rules, nil), nil
}
