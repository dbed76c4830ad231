package iptables

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
)

// natTable is one table (nat, raw) as iptables-save printed it.
type NatTable struct {
	Chains map[string]bool     // every chain, built-in or not
	Rules  map[string][]string // chain -> rule specs in order, without "-A <chain> "
}

func ParseNATSave(out []byte) (NatTable, error) { return ParseTable(out, "nat") }

// parseTable reads one table from iptables-save output; a table it did not
// print is empty.
func ParseTable(out []byte, table string) (NatTable, error) {
	ts, err := ParseSave(out)
	t := ts[table]
	if t.Chains == nil {
		t = NatTable{Chains: map[string]bool{}, Rules: map[string][]string{}}
	}
	return t, err
}

// parseSave reads every table iptables-save printed, by name.
func ParseSave(out []byte) (map[string]NatTable, error) {
	ts := map[string]NatTable{}
	var t NatTable
	in := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "*"):
			in = true
			t = NatTable{Chains: map[string]bool{}, Rules: map[string][]string{}}
			ts[line[1:]] = t
		case !in:
		case line == "COMMIT":
			in = false
		case strings.HasPrefix(line, ":"):
			name, _, _ := strings.Cut(line[1:], " ")
			t.Chains[name] = true
		case strings.HasPrefix(line, "-A "):
			chain, spec, ok := strings.Cut(line[3:], " ")
			if !ok {
				return ts, fmt.Errorf("iptables-save: unexpected line %q", line)
			}
			t.Rules[chain] = append(t.Rules[chain], spec)
		default:
			return ts, fmt.Errorf("iptables-save: unexpected line %q", line)
		}
	}
	return ts, sc.Err()
}
