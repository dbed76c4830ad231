// Package benchnode is what the benchmark commands (scripts/parallelbench,
// scripts/checkbench) share: a stand-in node made of network namespaces
// and a work folder, removed again at the end; the CPU time their plugin
// processes used (medians: scripts/internal/stats).
package benchnode

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/tests/parallel"
)

// Node holds what a benchmark made and must remove: network namespaces
// (named cniforge-test-*), a work folder, and whatever it registers with
// Defer. Close removes them, the last made first.
type Node struct {
	Dir      string // the work folder
	cleanups []func() error
}

// New makes the work folder, named from prefix, in the temporary folder.
func New(prefix string) (*Node, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, err
	}
	n := &Node{Dir: dir}
	n.Defer(func() error { return os.RemoveAll(dir) })
	return n, nil
}

// Defer registers f for Close.
func (n *Node) Defer(f func() error) { n.cleanups = append(n.cleanups, f) }

// Close runs what Defer registered, in reverse.
func (n *Node) Close() {
	for _, c := range slices.Backward(n.cleanups) {
		_ = c() // best effort: a namespace left behind is named cniforge-test-* and removable by hand
	}
	n.cleanups = nil
}

// NewNS makes a network namespace that Close removes.
func (n *Node) NewNS() (*ns.NetNS, error) {
	netns, cleanup, err := testutil.CreateNS()
	if err != nil {
		return nil, err
	}
	n.Defer(cleanup)
	return netns, nil
}

// Host makes the i-th stand-in host: a namespace of its own, and a libcni
// runtime there for network (its host-local data in Folder(i)/data) with
// the plugins in binDir, caching results in CacheDir(i). Each keeps
// its own bridge and chains, as a node running only those plugins would.
func (n *Node) Host(i int, network parallel.Network, binDir string) (*parallel.Runtime, error) {
	host, err := n.NewNS()
	if err != nil {
		return nil, err
	}
	network.DataDir = filepath.Join(n.Folder(i), "data")
	list, err := network.ConfList()
	if err != nil {
		return nil, err
	}
	return parallel.NewRuntime(host, list, binDir, n.CacheDir(i)), nil
}

// Folder is the i-th stand-in host's folder in the work folder.
func (n *Node) Folder(i int) string { return filepath.Join(n.Dir, fmt.Sprint(i)) }

// CacheDir is where the i-th stand-in host's runtime caches results.
func (n *Node) CacheDir(i int) string { return filepath.Join(n.Folder(i), "cache") }

// ChildCPU is the CPU time (user + system) of every waited-for child
// process so far, their own waited-for children included: what the
// plugin processes a benchmark ran used, which a busy machine changes far
// less than wall time.
func ChildCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru) // cannot fail with a valid pointer
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
