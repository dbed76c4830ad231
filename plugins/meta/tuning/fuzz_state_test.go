package tuning

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/cniforge/plugins/pkg/testutil"
)

// FuzzTuningState: whatever a state file holds (ours, upstream's, or a
// damaged one), reading it neither panics nor hangs; a file that reads is
// judged by validStatePath key by key, and written back and read again
// gives the same state (what DEL and GC rely on).
func FuzzTuningState(f *testing.F) {
	f.Add([]byte(`{"mac": "02:00:00:00:00:01", "promisc": true, "mtu": 1500, "allmulti": false, "txQLen": 1000,
		"sysctl": {"net/ipv4/conf/eth0/arp_filter": "0", "net/core/somaxconn": "4096"}, "network": "fuzz"}`))
	f.Add([]byte(`{"mac":"0a:58:0a:f4:00:05","mtu":1450}`)) // upstream's configToRestore
	f.Add([]byte(`{"sysctl": {"../../etc/passwd": "x", "net/../../x": "y", "/net/a": "z"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		p := statePath(dir, "fuzz-container", "eth0")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		var st *state
		var err error
		testutil.Bounded(t, "readState", func() { st, err = readState(p) })
		if err != nil {
			return
		}
		if st == nil {
			t.Fatalf("readState of an existing file returned no state and no error")
		}
		for k := range st.SysCtl {
			var ok bool
			testutil.Bounded(t, "validStatePath", func() { ok = validStatePath(k) })
			if ok && filepath.Clean(filepath.Join("/proc/sys", k)) != filepath.Join("/proc/sys", k) {
				t.Fatalf("validStatePath(%q) accepts a path that leaves its place", k)
			}
		}
		again := statePath(dir, "again", "eth0")
		if err := writeState(again, st); err != nil {
			t.Fatal(err)
		}
		st2, err := readState(again)
		if err != nil {
			t.Fatalf("a state we wrote does not read back: %v", err)
		}
		// Compared as written: an empty sysctl map and none write alike.
		a, _ := json.Marshal(st)
		b, _ := json.Marshal(st2)
		if string(a) != string(b) {
			t.Fatalf("state round trip differs:\n%s\n%s", a, b)
		}
	})
}
