package node

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/all"
)

func runCLI(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(testutil.Multicall(t), args...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// installed checks dir holds cniforge (the same bytes as the built binary)
// and a link per plugin that runs that plugin; and no temp files.
func installed(t *testing.T, dir string) {
	t.Helper()
	want, err := os.ReadFile(testutil.Multicall(t))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "cniforge"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s/cniforge is not the built binary (%v)", dir, err)
	}
	for _, p := range all.Plugins() {
		cmd := exec.Command(filepath.Join(dir, p.Name))
		cmd.Env = []string{}
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "CNI "+p.Name+" plugin ") {
			t.Errorf("%s/%s: %v %q, want its about text", dir, p.Name, err, out)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left behind %s", e.Name())
		}
	}
}

func TestInstallFreshThenAgain(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "opt", "cni", "bin")
	out, rc := runCLI(t, "install", "--dir", dir)
	if rc != 0 {
		t.Fatalf("install: exit %d: %s", rc, out)
	}
	installed(t, dir)
	if n := strings.Count(out, ": new\n"); n != len(all.Plugins())+1 {
		t.Errorf("first install reported %d new files, want %d:\n%s", n, len(all.Plugins())+1, out)
	}
	out, rc = runCLI(t, "install", "--dir", dir)
	if rc != 0 {
		t.Fatalf("second install: exit %d: %s", rc, out)
	}
	installed(t, dir)
	if n := strings.Count(out, ": replaced cniforge's\n"); n != len(all.Plugins())+1 {
		t.Errorf("second install reported %d replaced files, want all:\n%s", n, out)
	}
}

// A separate cniforge binary (the old README's install) is cniforge's and
// replaced; an upstream or user file is refused, and then nothing at all
// changes, until --force.
func TestInstallRefusesForeignFiles(t *testing.T) {
	dir := t.TempDir()
	sep, err := os.ReadFile(filepath.Join(filepath.Dir(testutil.Multicall(t)), "bridge"))
	if err != nil {
		t.Fatal(err)
	}
	foreign := []byte("#!/bin/sh\necho upstream host-local\n")
	must(t, os.WriteFile(filepath.Join(dir, "bridge"), sep, 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "host-local"), foreign, 0o755))

	out, rc := runCLI(t, "install", "--dir", dir)
	if rc != 1 || !strings.Contains(out, `["host-local"] not cniforge's; nothing installed`) {
		t.Fatalf("install over a foreign host-local: exit %d: %s", rc, out)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("a refused install wrote files: %v", entries)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "host-local")); !bytes.Equal(b, foreign) {
		t.Error("a refused install changed host-local")
	}

	out, rc = runCLI(t, "install", "--force", "--dir", dir)
	if rc != 0 {
		t.Fatalf("install --force: exit %d: %s", rc, out)
	}
	installed(t, dir)
	for _, line := range []string{
		filepath.Join(dir, "bridge") + " -> cniforge: replaced cniforge's",
		filepath.Join(dir, "host-local") + " -> cniforge: replaced a file not cniforge's (--force)",
		filepath.Join(dir, "cniforge") + ": new",
	} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("install --force did not report %q:\n%s", line, out)
		}
	}
}

func TestInstallBadArguments(t *testing.T) {
	for _, args := range [][]string{{"install", "--nope"}, {"install", "extra"}} {
		if out, rc := runCLI(t, args...); rc != 2 {
			t.Errorf("%v: exit %d, want 2: %s", args, rc, out)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A FIFO named like a plugin must not hang install, nor a link to
// /dev/zero make it read without end: neither is a regular file, so
// neither is cniforge's. (The run is bounded in time and memory so that
// a regression fails instead of taking the machine.)
func TestInstallReadsOnlyRegularFiles(t *testing.T) {
	dir := t.TempDir()
	must(t, unix.Mkfifo(filepath.Join(dir, "bridge"), 0o644))
	must(t, os.Symlink("/dev/zero", filepath.Join(dir, "loopback")))
	bounded := func(args ...string) (string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		argv := append([]string{"--as=2147483648", testutil.Multicall(t)}, args...)
		out, err := exec.CommandContext(ctx, "prlimit", argv...).CombinedOutput()
		if ctx.Err() != nil {
			t.Fatalf("install %v hung: %s", args, out)
		}
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	out, rc := bounded("install", "--dir", dir)
	if rc != 1 || !strings.Contains(out, `["bridge" "loopback"] not cniforge's; nothing installed`) {
		t.Fatalf("install over a FIFO and a link to /dev/zero: exit %d: %s", rc, out)
	}
	out, rc = bounded("install", "--force", "--dir", dir)
	if rc != 0 {
		t.Fatalf("install --force: exit %d: %s", rc, out)
	}
	installed(t, dir)
}
