package iptables

import (
	"slices"
	"testing"
)

func TestSnapshotRestoreLines(t *testing.T) {
	table := func(chain []string, entries ...string) NatTable {
		tb := NatTable{Chains: map[string]bool{"ENTRY": true}, Rules: map[string][]string{"ENTRY": append([]string{"-j OTHER"}, entries...)}}
		if chain != nil {
			tb.Chains["C"] = true
			tb.Rules["C"] = chain
		}
		return tb
	}
	before := table([]string{"a", "b", "c"}, "-p tcp -j C")
	snap := Snapshot(before, "C", "ENTRY")
	for _, tc := range []struct {
		name string
		now  NatTable
		want []string
	}{
		{"unchanged", before, nil},
		{"rules added between and after", table([]string{"a", "x", "b", "c", "y"}, "-p tcp -j C"), []string{"-D C 5", "-D C 2"}},
		{"entry added", table([]string{"a", "b", "c"}, "-p tcp -j C", "-p udp -j C"), []string{"-D ENTRY -p udp -j C"}},
		{"a rule removed: rewritten", table([]string{"a", "c"}, "-p tcp -j C"), []string{":C - [0:0]", "-A C a", "-A C b", "-A C c"}},
		{"the entry removed", table([]string{"a", "b", "c"}), []string{"-A ENTRY -p tcp -j C"}},
		{"the chain gone", table(nil), []string{":C - [0:0]", "-A C a", "-A C b", "-A C c", "-A ENTRY -p tcp -j C"}},
	} {
		if got := snap.RestoreLines(tc.now); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
	fresh := Snapshot(table(nil), "C", "ENTRY")
	if got, want := fresh.RestoreLines(before), []string{"-D ENTRY -p tcp -j C", "-F C", "-X C"}; !slices.Equal(got, want) {
		t.Errorf("fresh: got %q, want %q", got, want)
	}
}
