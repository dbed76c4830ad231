package testutil

import (
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ns"
)

// ExecIn runs the built binary name (see Exec) from inside n, the test's
// stand-in host namespace, and fails the spec if it could not be run. The
// CNI error the plugin reported, if any, is in Output.Err.
func ExecIn(n *ns.NetNS, name string, c Call) Output {
	ginkgo.GinkgoHelper()
	return runInside(n, func() (Output, error) { return Exec(name, c) })
}

// runInside calls run inside n and returns its Output; it fails the spec
// if run (or entering n) returned an error: the plugin could not be run.
func runInside(n *ns.NetNS, run func() (Output, error)) Output {
	ginkgo.GinkgoHelper()
	var out Output
	gomega.Expect(n.Do(func() (err error) {
		out, err = run()
		return err
	})).To(gomega.Succeed())
	return out
}
