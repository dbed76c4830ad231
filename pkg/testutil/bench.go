package testutil

import (
	"testing"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/plugin"
)

// BenchNS makes a fresh network namespace with lo up for a benchmark, which
// runs outside Ginkgo, and removes it when tb ends (see CreateNS). It fails
// tb if the namespace cannot be made.
func BenchNS(tb testing.TB) *ns.NetNS {
	tb.Helper()
	n, cleanup, err := CreateNS()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cleanup() }) // best effort, as a deferred cleanup was
	return n
}

// BenchRun runs p in-process (see Run) inside hostNS for a benchmark and
// returns its output; it fails tb, naming the command, when p could not be
// run or reported a CNI error.
func BenchRun(tb testing.TB, hostNS *ns.NetNS, p plugin.Plugin, c Call) Output {
	tb.Helper()
	var out Output
	err := hostNS.Do(func() error {
		var err error
		out, err = Run(p, c)
		if err == nil && out.Err != nil {
			err = out.Err
		}
		return err
	})
	if err != nil {
		tb.Fatalf("%s: %v", c.Command, err)
	}
	return out
}
