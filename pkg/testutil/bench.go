package testutil

import (
	"testing"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/plugin"
)

// TBNS is a fresh network namespace for a benchmark (or another test
// outside Ginkgo), removed when tb's cleanup runs; it fails tb if none can
// be made.
func TBNS(tb testing.TB) *ns.NetNS {
	tb.Helper()
	n, cleanup, err := CreateNS()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cleanup() }) // best effort, as a deferred cleanup was: the run is over
	return n
}

// RunInErr runs p in-process (see Run) inside hostNS, outside Ginkgo: the
// error is the one that kept p from running or, failing that, the CNI error
// p reported.
func RunInErr(hostNS *ns.NetNS, p plugin.Plugin, c Call) (Output, error) {
	var out Output
	err := hostNS.Do(func() error {
		var err error
		out, err = Run(p, c)
		if err == nil && out.Err != nil {
			err = out.Err
		}
		return err
	})
	return out, err
}
