package netfilter

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
)

// natTable is one table (nat, raw) as iptables-save printed it.
type natTable struct {
	chains map[string]bool     // every chain, built-in or not
	rules  map[string][]string // chain -> rule specs in order, without "-A <chain> "
}

func parseNATSave(out []byte) (natTable, error) { return parseTable(out, "nat") }

// parseTable reads one table from iptables-save output; a table it did not
// print is empty.
func parseTable(out []byte, table string) (natTable, error) {
	ts, err := parseSave(out)
	t := ts[table]
	if t.chains == nil {
		t = natTable{chains: map[string]bool{}, rules: map[string][]string{}}
	}
	return t, err
}

// parseSave reads every table iptables-save printed, by name.
func parseSave(out []byte) (map[string]natTable, error) {
	ts := map[string]natTable{}
	var t natTable
	in := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "*"):
			in = true
			t = natTable{chains: map[string]bool{}, rules: map[string][]string{}}
			ts[line[1:]] = t
		case !in:
		case line == "COMMIT":
			in = false
		case strings.HasPrefix(line, ":"):
			name, _, _ := strings.Cut(line[1:], " ")
			t.chains[name] = true
		case strings.HasPrefix(line, "-A "):
			chain, spec, ok := strings.Cut(line[3:], " ")
			if !ok {
				return ts, fmt.Errorf("iptables-save: unexpected line %q", line)
			}
			t.rules[chain] = append(t.rules[chain], spec)
		default:
			return ts, fmt.Errorf("iptables-save: unexpected line %q", line)
		}
	}
	return ts, sc.Err()
}
