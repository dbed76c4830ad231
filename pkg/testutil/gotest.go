package testutil

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cniforge/plugins/pkg/ns"
)

// Multicall returns the built bin/cniforge (./build_linux.sh), for plain
// Go tests that run it as an admin would; t fails when it is missing.
func Multicall(t testing.TB) string {
	t.Helper()
	path := filepath.Join(BinDir(), "cniforge")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s missing (run ./build_linux.sh first): %v", path, err)
	}
	return path
}

// NewTestNS is NewNS for plain Go tests: a fresh netns with lo up, removed
// when t ends. The returned remove may also be called earlier.
func NewTestNS(t testing.TB) (*ns.NetNS, func() error) {
	t.Helper()
	n, remove, err := CreateNS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = remove() })
	return n, remove
}
