package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/testutil"
)

func TestParseInittrace(t *testing.T) {
	stderr := []byte(`init runtime @0.010 ms, 0.050 ms clock, 0 bytes, 0 allocs
init errors @0.5 ms, 0.001 ms clock, 16 bytes, 1 allocs
some other line
init github.com/vishvananda/netlink @7.2 ms, 0.012 ms clock, 5136 bytes, 41 allocs
`)
	got := parseInittrace(stderr)
	if len(got.pkgs) != 3 || got.pkgs["github.com/vishvananda/netlink"] != 0.012 {
		t.Errorf("packages: %v, want runtime, errors and vishvananda/netlink (0.012 ms)", got.pkgs)
	}
	if got.bytes != 5152 {
		t.Errorf("bytes: %d, want 5152", got.bytes)
	}
	if d := got.clock - 0.063; d > 1e-9 || d < -1e-9 {
		t.Errorf("clock: %v ms, want 0.063", got.clock)
	}
}

func TestParsePluginList(t *testing.T) {
	got, err := parsePluginList([]byte("cniforge v1.0.0\nplugins: bridge loopback\nCNI protocol versions supported: 1.0.0\n"))
	if err != nil || !slices.Equal(got, []string{"bridge", "loopback"}) {
		t.Errorf("got %v, %v; want [bridge loopback]", got, err)
	}
	if _, err := parsePluginList([]byte("cniforge v1.0.0\n")); err == nil {
		t.Error("no plugins line: no error")
	}
}

// install puts the built multicall into a folder of its own, with its links.
func install(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command(filepath.Join(testutil.BinDir(), "cniforge"), "install", "--dir", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("cniforge install --dir %s: %v\n%s", dir, err, out)
	}
	return dir
}

// TestRunSmoke runs the benchmark once over two plugins, both modes: a row
// per plugin in each table, nothing timed.
func TestRunSmoke(t *testing.T) {
	multi := install(t)
	var out bytes.Buffer
	o := options{n: 1, trace: 1, modes: []string{"version", "add"}, sep: testutil.BinDir(), only: regexp.MustCompile(`^(bridge|loopback)$`), copy: true}
	if err := run(&out, multi, o); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	rows := regexp.MustCompile(`(?m)^(bridge|loopback) +[0-9.]+ `).FindAllString(out.String(), -1)
	if len(rows) != 6 { // VERSION, ADD, inittrace
		t.Errorf("%d plugin rows, want 6 (bridge and loopback in 3 tables):\n%s", len(rows), out.String())
	}
	if !strings.Contains(out.String(), "only in multi") {
		t.Errorf("no inittrace table:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "measured as copies in ") {
		t.Errorf("no word of the copies measured:\n%s", out.String())
	}
}

// TestCopyFolders: the multicall copied as cniforge install makes it, the
// separate binary byte for byte; a folder to compare with may lack one;
// with evict, the copies are out of the page cache.
func TestCopyFolders(t *testing.T) {
	multi := install(t)
	other := t.TempDir()
	for _, evict := range []bool{false, true} {
		tmp := t.TempDir()
		got, err := copyFolders(tmp, []folder{{"multi", multi}, {"sep", testutil.BinDir()}, {"c1", other}}, []string{"loopback"}, evict)
		if err != nil {
			t.Fatal(err)
		}
		if want := []folder{{"multi", filepath.Join(tmp, "multi")}, {"sep", filepath.Join(tmp, "sep")}, {"c1", filepath.Join(tmp, "c1")}}; !slices.Equal(got, want) {
			t.Errorf("folders %v, want %v", got, want)
		}
		if l, err := os.Readlink(filepath.Join(tmp, "multi", "loopback")); err != nil || l != "cniforge-light" {
			t.Errorf("multi/loopback: link to %q, %v; want cniforge-light", l, err)
		}
		pairs := [][2]string{
			{filepath.Join(multi, "cniforge"), filepath.Join(tmp, "multi", "cniforge")},
			{filepath.Join(multi, "cniforge-light"), filepath.Join(tmp, "multi", "cniforge-light")},
			{filepath.Join(multi, "cniforge-dhcp"), filepath.Join(tmp, "multi", "cniforge-dhcp")},
			{filepath.Join(testutil.BinDir(), "loopback"), filepath.Join(tmp, "sep", "loopback")},
		}
		// Before reading them: tmpfs keeps its pages whatever one asks.
		var fs unix.Statfs_t
		if err := unix.Statfs(tmp, &fs); err != nil {
			t.Fatal(err)
		}
		for _, f := range pairs {
			n := resident(t, f[1])
			switch {
			case fs.Type == unix.TMPFS_MAGIC:
				t.Logf("%s: on tmpfs, %d pages resident whatever evict says", f[1], n)
			case evict && n != 0:
				t.Errorf("evict: %s has %d pages in the page cache, want none", f[1], n)
			case !evict && n == 0:
				t.Errorf("no evict: %s has no page in the page cache, want those the copy wrote", f[1])
			}
		}
		for _, f := range pairs {
			a, errA := os.ReadFile(f[0])
			b, errB := os.ReadFile(f[1])
			if errA != nil || errB != nil || !bytes.Equal(a, b) {
				t.Errorf("%s is not a copy of %s (%v, %v)", f[1], f[0], errA, errB)
			}
		}
		if _, err := os.Stat(filepath.Join(tmp, "c1", "loopback")); !os.IsNotExist(err) {
			t.Errorf("c1/loopback: %v, want none (c1 has none)", err)
		}
	}
}

// resident is how many of path's pages are in the page cache (mincore).
func resident(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatalf("mincore %s: %v", path, errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// TestRunRefusesWrongAnswer: a binary that answers neither call as a
// plugin does is an error, not a fast sample.
func TestRunRefusesWrongAnswer(t *testing.T) {
	multi := install(t)
	sep := t.TempDir()
	for _, p := range []string{"loopback"} {
		if err := os.WriteFile(filepath.Join(sep, p), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, mode := range []string{"version", "add"} {
		var out bytes.Buffer
		o := options{n: 1, modes: []string{mode}, sep: sep, only: regexp.MustCompile(`^loopback$`)}
		if err := run(&out, multi, o); err == nil || !strings.Contains(err.Error(), filepath.Join(sep, "loopback")) {
			t.Errorf("%s: run over a loopback that prints nothing: %v, want an error naming it\n%s", mode, err, out.String())
		}
	}
}
