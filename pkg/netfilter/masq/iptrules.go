package masq

import (
	"encoding/hex"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// Multicast destinations are never masqueraded: containers on one bridge
// talk to each other over multicast with their own source addresses.
var multicast = [...]string{nftnl.IPv4: "224.0.0.0/4", nftnl.IPv6: "ff00::/8"}

// iptablesRules is the desired nat-table content of one attachment in one
// family, as iptables-save prints it (without the leading "-A <chain> "), so
// that desired and current state compare as text.
//
// The chain is per network and container (upstream's name), so two
// attachments of one container to one network (eth0, eth1) share it. To tell
// their rules apart, each attachment adds to the chain one marker per
// address: a rule without a target (it only counts packets) matching the
// address and its subnet, whose comment names the interface. Upstream's DEL
// flushes and deletes the chain, markers included, and deletes the
// POSTROUTING jumps by their exact spec, so the jumps and the ACCEPT and
// MASQUERADE rules keep upstream's form and comment.
type iptablesRules struct {
	chain  string
	ifName string
	// markers of this attachment, one per address.
	markers []iptablesMarker
	// accepts: an ACCEPT per container subnet.
	accepts []string
	// masq: the MASQUERADE rule, last in the chain.
	masq string
	// jumps in POSTROUTING, one per container address.
	jumps []string
	// comment and markerComment as written, unquoted (setupNFT's).
	comment, markerComment string
}

// rules returns the chain's content on a clean table: markers, ACCEPTs,
// MASQUERADE.
func (r iptablesRules) rules() []string {
	var out []string
	for _, m := range r.markers {
		out = append(out, m.spec)
	}
	out = append(out, r.accepts...)
	return append(out, r.masq)
}

// desiredIPTables returns the rules of o for addrs, all of family f, with
// the destinations of exclude (those of family f) left unmasqueraded.
//
// Upstream appends ACCEPT and MASQUERADE per address, so a second address of
// one family lands its ACCEPT after the first MASQUERADE; here every ACCEPT
// precedes the single MASQUERADE.
func desiredIPTables(o netfilter.Owner, f nftnl.Family, addrs []*net.IPNet, exclude ...*net.IPNet) iptablesRules {
	r := iptablesRules{chain: netfilter.IptablesChain(o), ifName: o.IfName,
		comment: netfilter.IptablesComment(o), markerComment: netfilter.IptablesMarkerComment(o)}
	comment := iptables.SaveQuote(r.comment)
	marker := iptables.SaveQuote(r.markerComment)
	for _, a := range addrs {
		m := iptablesMarker{host: nftnl.HostAddr(a).String(), subnet: nftnl.SubnetOf(a).String(), ifName: o.IfName}
		m.spec = fmt.Sprintf("-s %s -d %s -m comment --comment %s", m.host, m.subnet, marker)
		r.addUnmasqueraded(m, comment)
		// Each excluded destination is one more marker of this interface
		// (-s <address> -d <excluded CIDR>) with its ACCEPT: merges, GC and
		// Teardown then keep or drop the exclusions with the interface's
		// other markers, and planLines makes their ACCEPTs as it makes the
		// subnets'. Upstream's DEL flushes the chain, exclusions included.
		for _, x := range exclude {
			if x == nil || nftnl.FamilyOf(x.IP) != f {
				continue
			}
			xm := iptablesMarker{host: m.host, subnet: nftnl.SubnetOf(x).String(), ifName: o.IfName}
			xm.spec = fmt.Sprintf("-s %s -d %s -m comment --comment %s", xm.host, xm.subnet, marker)
			r.addUnmasqueraded(xm, comment)
		}
		jump := fmt.Sprintf("-s %s -m comment --comment %s -j %s", nftnl.HostAddr(a), comment, r.chain)
		if !slices.Contains(r.jumps, jump) {
			r.jumps = append(r.jumps, jump)
		}
	}
	r.masq = masqSpec(f, comment)
	return r
}

// addUnmasqueraded adds marker m and the ACCEPT of its destination, each
// once, in the order nftRules encodes them.
func (r *iptablesRules) addUnmasqueraded(m iptablesMarker, quotedComment string) {
	if !slices.Contains(r.markers, m) {
		r.markers = append(r.markers, m)
	}
	if a := acceptSpec(m.subnet, quotedComment); !slices.Contains(r.accepts, a) {
		r.accepts = append(r.accepts, a)
	}
}

func acceptSpec(subnet, quotedComment string) string {
	return fmt.Sprintf("-d %s -m comment --comment %s -j ACCEPT", subnet, quotedComment)
}

func masqSpec(f nftnl.Family, quotedComment string) string {
	return fmt.Sprintf("! -d %s -m comment --comment %s -j MASQUERADE", multicast[f], quotedComment)
}

// freshLines installs r where its chain does not exist yet. "-N" fails when
// the chain exists, which aborts the whole restore without a change: the
// caller then merges into what is there.
func (r iptablesRules) freshLines() []string {
	lines := []string{"-N " + r.chain}
	for _, s := range r.rules() {
		lines = append(lines, "-A "+r.chain+" "+s)
	}
	for _, j := range r.jumps {
		lines = append(lines, "-A POSTROUTING "+j)
	}
	return lines
}

// renderIPTables returns the iptables-restore inputs Setup applies on a
// clean table, per family, for tests and debugging.
func renderIPTables(o netfilter.Owner, addrs []*net.IPNet) map[nftnl.Family]string {
	out := map[nftnl.Family]string{}
	for f, as := range nftnl.ByFamily(addrs) {
		out[f] = string(iptables.RestorePayload(desiredIPTables(o, f, as).freshLines()))
	}
	return out
}

// jumpsTo returns the POSTROUTING rules that jump to chain.
func (t natTable) jumpsTo(chain string) []string {
	var js []string
	for _, spec := range t.Rules["POSTROUTING"] {
		if strings.HasSuffix(spec, " -j "+chain) {
			js = append(js, spec)
		}
	}
	return js
}

// deleteLines removes chain and every POSTROUTING jump to it. Deleting by
// the spec iptables-save printed matches the rule exactly; identical
// duplicates are removed one per line.
func (t natTable) deleteLines(chain string) []string {
	var lines []string
	for _, j := range t.jumpsTo(chain) {
		lines = append(lines, "-D POSTROUTING "+j)
	}
	if t.Chains[chain] {
		lines = append(lines, "-F "+chain, "-X "+chain)
	}
	return lines
}

// iptablesMarker is a marker rule read back from a chain.
type iptablesMarker struct {
	spec, host, subnet, ifName string
}

// iptablesMarkerRE reads a marker as iptables-save prints it; the
// interface name is in hex (see iptablesMarkerComment).
var iptablesMarkerRE = iptables.NewLazyRE(`^-s (\S+) -d (\S+) -m comment --comment "name: \\"[^"\\]*\\" id: \\"[^"\\]*\\" if: ((?:[0-9a-f]{2})*)"$`)

// parseIPTablesMarker reads a marker rule; ok is false for any other rule.
func parseIPTablesMarker(spec string) (m iptablesMarker, ok bool) {
	sm := iptablesMarkerRE.FindStringSubmatch(spec)
	if sm == nil {
		return m, false
	}
	ifName, err := hex.DecodeString(sm[3])
	if err != nil {
		return m, false
	}
	return iptablesMarker{spec: spec, host: sm[1], subnet: sm[2], ifName: string(ifName)}, true
}

// chainView is what a chain holds of attachments: their markers and the
// ACCEPT rules (any attachment's, as they are not told apart).
type chainView struct {
	markers []iptablesMarker
	accepts []string
}

func (t natTable) view(chain string) chainView {
	var v chainView
	for _, spec := range t.Rules[chain] {
		if m, ok := parseIPTablesMarker(spec); ok {
			v.markers = append(v.markers, m)
		} else if strings.HasSuffix(spec, " -j ACCEPT") && strings.HasPrefix(spec, "-d ") {
			v.accepts = append(v.accepts, spec)
		}
	}
	return v
}

func (v chainView) hasMarkers(ifName string) bool {
	return slices.ContainsFunc(v.markers, func(m iptablesMarker) bool { return m.ifName == ifName })
}

// jumpHost returns the source address of a POSTROUTING jump ("" if none).
func jumpHost(spec string) string {
	rest, ok := strings.CutPrefix(spec, "-s ")
	if !ok {
		return ""
	}
	host, _, _ := strings.Cut(rest, " ")
	return host
}

// chainPlan says how to change an attachment chain shared by the
// interfaces of one container on one network.
type chainPlan struct {
	chain string
	f     nftnl.Family
	// comment is upstream's comment, quoted as iptables-save prints it.
	comment string
	// drop selects the interfaces whose markers and jumps go.
	drop func(ifName string) bool
	// dropUnmarked removes jumps that no marker accounts for (made by
	// upstream, whose layout has no markers).
	dropUnmarked bool
	// add is the attachment to merge in, or nil.
	add *iptablesRules
}

// planLines returns the iptables-restore lines that carry out p on t, nil
// when t already is as p wants it. The chain ends up holding the markers
// of the interfaces that stay (sorted by interface name so that the result
// does not depend on who wrote last), an ACCEPT per subnet of theirs, and
// one MASQUERADE; jumps of dropped interfaces and duplicate jumps go. When
// nothing stays, the chain and its jumps are deleted.
//
// Jumps that no marker accounts for come from upstream's plugins. They are
// kept unless dropUnmarked, and while any is kept, so is every ACCEPT rule
// of the chain (their subnets are not known).
func (t natTable) planLines(p chainPlan) []string {
	v := t.view(p.chain)
	var markers []iptablesMarker
	for _, m := range v.markers {
		if !p.drop(m.ifName) {
			markers = append(markers, m)
		}
	}
	var wantJumps []string
	if p.add != nil {
		markers = append(markers, p.add.markers...)
		wantJumps = p.add.jumps
	}
	slices.SortStableFunc(markers, func(a, b iptablesMarker) int { return strings.Compare(a.ifName, b.ifName) })
	keptHosts, oldHosts := map[string]bool{}, map[string]bool{}
	for _, m := range markers {
		keptHosts[m.host] = true
	}
	for _, m := range v.markers {
		oldHosts[m.host] = true
	}

	var del, add []string
	kept, unmarked := 0, false
	seen := map[string]bool{}
	for _, j := range t.jumpsTo(p.chain) {
		h := jumpHost(j)
		switch {
		case seen[j]:
			del = append(del, j) // a duplicate
		case slices.Contains(wantJumps, j), keptHosts[h]:
			kept++
		case oldHosts[h], p.dropUnmarked:
			del = append(del, j)
		default:
			kept++
			unmarked = true
		}
		seen[j] = true
	}
	for _, j := range wantJumps {
		if !seen[j] {
			add = append(add, j)
		}
	}
	if len(markers) == 0 && kept == 0 && len(add) == 0 {
		return t.deleteLines(p.chain)
	}

	var rules, accepts []string
	for _, m := range markers {
		rules = append(rules, m.spec)
	}
	if unmarked {
		accepts = slices.Clone(v.accepts)
	}
	for _, m := range markers {
		if a := acceptSpec(m.subnet, p.comment); !slices.Contains(accepts, a) {
			accepts = append(accepts, a)
		}
	}
	rules = append(append(rules, accepts...), masqSpec(p.f, p.comment))

	var lines []string
	if !t.Chains[p.chain] || !slices.Equal(t.Rules[p.chain], rules) {
		// Declaring the chain flushes it under --noflush; the refill is
		// part of the same transaction.
		lines = append(lines, ":"+p.chain+" - [0:0]")
		for _, s := range rules {
			lines = append(lines, "-A "+p.chain+" "+s)
		}
	}
	for _, j := range del {
		lines = append(lines, "-D POSTROUTING "+j)
	}
	for _, j := range add {
		lines = append(lines, "-A POSTROUTING "+j)
	}
	return lines
}

// mergeLines merges r into t: r's interface's markers and jumps are
// replaced by r's, every other interface's stay. Nil when t already holds
// that.
func (t natTable) mergeLines(o netfilter.Owner, f nftnl.Family, r iptablesRules) []string {
	return t.planLines(chainPlan{
		chain:   r.chain,
		f:       f,
		comment: iptables.SaveQuote(netfilter.IptablesComment(o)),
		drop:    func(ifName string) bool { return ifName == o.IfName },
		add:     &r,
	})
}

// teardownLines removes o's markers and jumps from its chain, and the chain
// when nothing else is left in it. A chain without any marker has upstream's
// layout, which cannot tell interfaces apart: it goes whole (as upstream's
// DEL does). When the chain has other interfaces' markers but none of o's,
// o's jumps, if any, are the ones no marker accounts for.
func (t natTable) teardownLines(o netfilter.Owner, f nftnl.Family) []string {
	chain := netfilter.IptablesChain(o)
	return t.planLines(chainPlan{
		chain:        chain,
		f:            f,
		comment:      iptables.SaveQuote(netfilter.IptablesComment(o)),
		drop:         func(ifName string) bool { return ifName == o.IfName },
		dropUnmarked: !t.view(chain).hasMarkers(o.IfName),
	})
}

// gcLines removes from o's chain the interfaces not in keep, keeping jumps
// no marker accounts for (they may be a kept interface's).
func (t natTable) gcLines(o netfilter.Owner, f nftnl.Family, keep map[string]bool) []string {
	return t.planLines(chainPlan{
		chain:   netfilter.IptablesChain(o),
		f:       f,
		comment: iptables.SaveQuote(netfilter.IptablesComment(o)),
		drop:    func(ifName string) bool { return !keep[ifName] },
	})
}

// missing names what of r is absent from t, for Check. r's markers are
// required unless the chain has no marker at all: then the chain has
// upstream's layout, and its jumps are r's.
func (t natTable) missing(r iptablesRules) []string {
	if !t.Chains[r.chain] {
		return []string{fmt.Sprintf("nat chain %s", r.chain)}
	}
	var miss []string
	have := t.Rules[r.chain]
	if len(t.view(r.chain).markers) > 0 {
		for _, m := range r.markers {
			if !slices.Contains(have, m.spec) {
				miss = append(miss, "nat rule -A "+r.chain+" "+m.spec)
			}
		}
	}
	// Upstream's ADD of another interface appends its ACCEPT and
	// MASQUERADE after ours, so the MASQUERADE need not be last: this
	// attachment's ACCEPTs must precede the first one, which must exist.
	masqAt := slices.Index(have, r.masq)
	for _, s := range r.accepts {
		if i := slices.Index(have, s); i < 0 || (masqAt >= 0 && i > masqAt) {
			miss = append(miss, "nat rule -A "+r.chain+" "+s+" (before the MASQUERADE)")
		}
	}
	if masqAt < 0 {
		miss = append(miss, "nat rule -A "+r.chain+" "+r.masq)
	}
	for _, j := range r.jumps {
		if !slices.Contains(t.Rules["POSTROUTING"], j) {
			miss = append(miss, "nat rule -A POSTROUTING "+j)
		}
	}
	return miss
}

// owners returns the attachment chains of t (CNI-<24 hex>) with the network
// their comments name. Chains without such a comment are not ours to judge.
func (t natTable) ownedChains() map[string]string {
	out := map[string]string{}
	for chain := range t.Chains {
		if !iptablesChainRE.MatchString(chain) {
			continue
		}
		specs := append(slices.Clone(t.Rules[chain]), t.jumpsTo(chain)...)
		for _, s := range specs {
			if m := iptablesCommentRE.FindStringSubmatch(s); m != nil {
				out[chain] = m[1]
				break
			}
		}
	}
	return out
}

// natTable is a nat table as iptables-save shows it (iptables.NatTable),
// with what the masquerade plans on it.
type natTable iptables.NatTable

// save reads the nat table of f.
func (m *iptablesMasq) save(f nftnl.Family) (natTable, error) {
	t, err := m.Runner.Save(f)
	return natTable(t), err
}
