package prestart

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// A fed process gets exactly its input; one killed unfed did nothing.
func TestFeedAndKill(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	// The process acts only on its whole input, as iptables-restore and
	// the IPAM plugins do.
	cmd := func() *exec.Cmd {
		return exec.Command("/bin/sh", "-c", `in=$(cat); printf '%s' "$in" > "$0"; echo done`, out)
	}

	p, err := Start(cmd())
	if err != nil {
		t.Fatal(err)
	}
	if werr, err := p.Feed([]byte("input")); werr != nil || err != nil {
		t.Fatalf("Feed: write %v, exit %v", werr, err)
	}
	if got, _ := os.ReadFile(out); string(got) != "input" || p.Stdout.String() != "done\n" {
		t.Errorf("fed process wrote %q and printed %q", got, p.Stdout.String())
	}
	if !p.Exited() {
		t.Error("Feed did not reap the process")
	}
	if _, err := p.Feed(nil); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("a second Feed gave %v", err)
	}
	p.Kill() // after Feed: nothing

	os.Remove(out)
	p, err = Start(cmd())
	if err != nil {
		t.Fatal(err)
	}
	p.Kill()
	if !p.Exited() {
		t.Error("Kill did not reap the process")
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a process killed unfed acted: %v", err)
	}
	if _, err := p.Feed([]byte("late")); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("Feed after Kill gave %v", err)
	}
}
