package netfilter

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"slices"
	"strings"
)

// Multicast destinations are never masqueraded: containers on one bridge
// talk to each other over multicast with their own source addresses.
var multicast = map[family]string{ipv4: "224.0.0.0/4", ipv6: "ff00::/8"}

// iptablesRules is the desired nat-table content of one attachment in one
// family, as iptables-save prints it (without the leading "-A <chain> "), so
// that desired and current state compare as text.
type iptablesRules struct {
	chain string
	// rules of chain, in order: an ACCEPT per container subnet, then one
	// MASQUERADE.
	rules []string
	// jumps in POSTROUTING, one per container address.
	jumps []string
}

// desiredIPTables returns the rules of o for addrs, all of family f.
//
// Upstream appends ACCEPT and MASQUERADE per address, so a second address of
// one family lands its ACCEPT after the first MASQUERADE; here every ACCEPT
// precedes the single MASQUERADE.
func desiredIPTables(o Owner, f family, addrs []*net.IPNet) iptablesRules {
	r := iptablesRules{chain: iptablesChain(o)}
	comment := saveQuote(iptablesComment(o))
	for _, a := range addrs {
		accept := fmt.Sprintf("-d %s -m comment --comment %s -j ACCEPT", subnetOf(a), comment)
		if !slices.Contains(r.rules, accept) {
			r.rules = append(r.rules, accept)
		}
		jump := fmt.Sprintf("-s %s -m comment --comment %s -j %s", hostAddr(a), comment, r.chain)
		if !slices.Contains(r.jumps, jump) {
			r.jumps = append(r.jumps, jump)
		}
	}
	r.rules = append(r.rules, fmt.Sprintf("! -d %s -m comment --comment %s -j MASQUERADE", multicast[f], comment))
	return r
}

// saveQuote quotes s the way iptables-save does and iptables-restore reads.
func saveQuote(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}

// restorePayload builds an iptables-restore --noflush input for the nat
// table. Each line is one restore command ("-N X", "-A X ...", ...).
func restorePayload(lines []string) []byte {
	var b bytes.Buffer
	b.WriteString("*nat\n")
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	b.WriteString("COMMIT\n")
	return b.Bytes()
}

// freshLines installs r where its chain does not exist yet. "-N" fails when
// the chain exists, which aborts the whole restore without a change: the
// caller then reconciles against what is there.
func (r iptablesRules) freshLines() []string {
	lines := []string{"-N " + r.chain}
	for _, s := range r.rules {
		lines = append(lines, "-A "+r.chain+" "+s)
	}
	for _, j := range r.jumps {
		lines = append(lines, "-A POSTROUTING "+j)
	}
	return lines
}

// renderIPTables returns the iptables-restore inputs Setup applies on a
// clean table, per family, for tests and debugging.
func renderIPTables(o Owner, addrs []*net.IPNet) map[family]string {
	out := map[family]string{}
	for f, as := range byFamily(addrs) {
		out[f] = string(restorePayload(desiredIPTables(o, f, as).freshLines()))
	}
	return out
}

// natTable is the nat table as iptables-save -t nat printed it.
type natTable struct {
	chains map[string]bool     // every chain, built-in or not
	rules  map[string][]string // chain -> rule specs in order, without "-A <chain> "
}

func parseNATSave(out []byte) (natTable, error) {
	t := natTable{chains: map[string]bool{}, rules: map[string][]string{}}
	in := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "*"):
			in = line == "*nat"
		case !in:
		case line == "COMMIT":
			in = false
		case strings.HasPrefix(line, ":"):
			name, _, _ := strings.Cut(line[1:], " ")
			t.chains[name] = true
		case strings.HasPrefix(line, "-A "):
			chain, spec, ok := strings.Cut(line[3:], " ")
			if !ok {
				return t, fmt.Errorf("iptables-save: unexpected line %q", line)
			}
			t.rules[chain] = append(t.rules[chain], spec)
		default:
			return t, fmt.Errorf("iptables-save: unexpected line %q", line)
		}
	}
	return t, sc.Err()
}

// jumpsTo returns the POSTROUTING rules that jump to chain.
func (t natTable) jumpsTo(chain string) []string {
	var js []string
	for _, spec := range t.rules["POSTROUTING"] {
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
	if t.chains[chain] {
		lines = append(lines, "-F "+chain, "-X "+chain)
	}
	return lines
}

// reconcileLines turns t into one holding r exactly: the chain is declared
// (which flushes it under --noflush) and refilled, stale or duplicate jumps
// are deleted, missing jumps appended. It returns nil when t already holds r.
func (t natTable) reconcileLines(r iptablesRules) []string {
	current := t.jumpsTo(r.chain)
	if t.chains[r.chain] && slices.Equal(t.rules[r.chain], r.rules) && sameSet(current, r.jumps) {
		return nil
	}
	lines := []string{":" + r.chain + " - [0:0]"}
	for _, j := range current {
		lines = append(lines, "-D POSTROUTING "+j)
	}
	for _, s := range r.rules {
		lines = append(lines, "-A "+r.chain+" "+s)
	}
	for _, j := range r.jumps {
		lines = append(lines, "-A POSTROUTING "+j)
	}
	return lines
}

// missing names what of r is absent from t, for Check.
func (t natTable) missing(r iptablesRules) []string {
	var miss []string
	if !t.chains[r.chain] {
		return []string{fmt.Sprintf("nat chain %s", r.chain)}
	}
	if !slices.Equal(t.rules[r.chain], r.rules) {
		for _, s := range r.rules {
			if !slices.Contains(t.rules[r.chain], s) {
				miss = append(miss, "nat rule -A "+r.chain+" "+s)
			}
		}
		if len(miss) == 0 {
			miss = append(miss, fmt.Sprintf("nat chain %s in order (has %q)", r.chain, t.rules[r.chain]))
		}
	}
	for _, j := range r.jumps {
		if !slices.Contains(t.rules["POSTROUTING"], j) {
			miss = append(miss, "nat rule -A POSTROUTING "+j)
		}
	}
	return miss
}

// owners returns the attachment chains of t (CNI-<24 hex>) with the network
// their comments name. Chains without such a comment are not ours to judge.
func (t natTable) ownedChains() map[string]string {
	out := map[string]string{}
	for chain := range t.chains {
		if !iptablesChainRE.MatchString(chain) {
			continue
		}
		specs := append(slices.Clone(t.rules[chain]), t.jumpsTo(chain)...)
		for _, s := range specs {
			if m := iptablesCommentRE.FindStringSubmatch(s); m != nil {
				out[chain] = m[1]
				break
			}
		}
	}
	return out
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
