package testutil

import (
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/plugin"
)

// RunIn runs p in-process (see Run) inside hostNS, the test's stand-in host
// namespace, and fails the spec if it could not be run. The CNI error the
// plugin reported, if any, is in Output.Err.
func RunIn(hostNS *ns.NetNS, p plugin.Plugin, c Call) Output {
	ginkgo.GinkgoHelper()
	return runInside(hostNS, func() (Output, error) { return Run(p, c) })
}

// MustRunIn is RunIn that also fails the spec when the plugin reports an
// error.
func MustRunIn(hostNS *ns.NetNS, p plugin.Plugin, c Call) Output {
	ginkgo.GinkgoHelper()
	out := RunIn(hostNS, p, c)
	gomega.Expect(out.Err).To(gomega.BeNil(), "%s: %v", c.Command, out.Err)
	return out
}
