package iptables

import (
	"fmt"
	"slices"
	"strings"
)

// ChainSnapshot is what a table held of one attachment before a change:
// its own chain's rules, and the rules of a shared chain that jump to it
// (CNI-HOSTPORT-DNAT's entries, POSTROUTING's jumps). An ADD may land on
// a live attachment (check --repair, a second ADD): its undo then goes back
// to the snapshot instead of removing the attachment, whose rules carry a
// running pod's traffic.
type ChainSnapshot struct {
	Chain, Entry string
	Exists       bool
	Rules        []string // Chain's, in order
	Entries      []string // Entry's rules jumping to Chain
}

// Snapshot reads chain and the rules of entry that jump to it from t.
func Snapshot(t NatTable, chain, entry string) ChainSnapshot {
	s := ChainSnapshot{Chain: chain, Entry: entry, Exists: t.Chains[chain], Entries: JumpsTo(t, entry, chain)}
	if s.Exists {
		s.Rules = slices.Clone(t.Rules[chain])
	}
	return s
}

// JumpsTo returns the rules of from in t that jump to chain.
func JumpsTo(t NatTable, from, chain string) []string {
	var out []string
	for _, spec := range t.Rules[from] {
		if spec == "-j "+chain || strings.HasSuffix(spec, " -j "+chain) {
			out = append(out, spec)
		}
	}
	return out
}

// RestoreLines are the iptables-restore lines that take t back to s.
// Rules of the chain that s does not hold are deleted by number, the
// others left as they are (counters, handles), when s's rules are, in
// order, among the chain's; otherwise the chain is rewritten as s. Entries
// s does not hold go, s's missing ones are appended. A chain s does not
// hold is deleted with every entry to it.
func (s ChainSnapshot) RestoreLines(t NatTable) []string {
	var l []string
	entries := JumpsTo(t, s.Entry, s.Chain)
	for _, e := range entries {
		if !slices.Contains(s.Entries, e) {
			l = append(l, "-D "+s.Entry+" "+e)
		}
	}
	if !s.Exists {
		if t.Chains[s.Chain] {
			l = append(l, "-F "+s.Chain, "-X "+s.Chain)
		}
		return l
	}
	if extra, ok := extraRules(t.Rules[s.Chain], s.Rules); t.Chains[s.Chain] && ok {
		for _, i := range slices.Backward(extra) {
			l = append(l, fmt.Sprintf("-D %s %d", s.Chain, i+1))
		}
	} else {
		l = append(l, ":"+s.Chain+" - [0:0]") // declares or flushes it
		for _, r := range s.Rules {
			l = append(l, "-A "+s.Chain+" "+r)
		}
	}
	for _, e := range s.Entries {
		if !slices.Contains(entries, e) {
			l = append(l, "-A "+s.Entry+" "+e)
		}
	}
	return l
}

// extraRules returns the indexes of have's rules that are not want's,
// when want's rules appear in have in want's order (ok).
func extraRules(have, want []string) (extra []int, ok bool) {
	j := 0
	for i, r := range have {
		if j < len(want) && r == want[j] {
			j++
			continue
		}
		extra = append(extra, i)
	}
	return extra, j == len(want)
}
