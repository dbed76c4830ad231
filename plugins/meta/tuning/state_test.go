package tuning

import (
	"os"
	"testing"
)

// Issue 14, kills mid-ADD: tests/killadd found an empty temp state file
// after an ADD was killed between creating and writing it, which GC could
// not attribute to a network. The temp name must never hold less than the
// whole state: at the moment the file is open and still empty, the name
// is absent, or still holds what an earlier killed ADD left.
func TestWriteStateNamesOnlyWholeFiles(t *testing.T) {
	dir := t.TempDir()
	p := statePath(dir, "ctr1", "eth0")
	var atOpen []string
	stateStep = func(step string) {
		data, err := os.ReadFile(tmpPath(p))
		switch {
		case os.IsNotExist(err):
			atOpen = append(atOpen, "absent")
		case err != nil:
			t.Errorf("read %s: %v", tmpPath(p), err)
		default:
			atOpen = append(atOpen, string(data))
		}
	}
	defer func() { stateStep = nil }()

	want := &state{Mtu: 1400, Network: "net1"}
	if err := writeState(p, want); err != nil {
		t.Fatal(err)
	}
	// An earlier ADD, killed after linking its temp file, left it.
	if err := os.WriteFile(tmpPath(p), []byte("left"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := writeState(p, want); err != nil {
		t.Fatal(err)
	}
	if len(atOpen) != 2 || atOpen[0] != "absent" || atOpen[1] != "left" {
		t.Errorf("temp file while the new one was empty: %q, want absent, then the leftover unchanged", atOpen)
	}
	got, err := readState(p)
	if err != nil || got == nil || got.Mtu != 1400 || got.Network != "net1" {
		t.Errorf("state read back: %+v, %v", got, err)
	}
	if _, err := os.Stat(tmpPath(p)); !os.IsNotExist(err) {
		t.Errorf("temp file after the write: %v, want none", err)
	}
}
