package testutil

import (
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/plugin"
)

// NewAttachNS makes what an attaching plugin's spec starts from: a fresh
// stand-in host namespace, a fresh container namespace (both removed after
// the spec, see NewNS) and an empty folder for host-local's data. Call it
// from a BeforeEach.
func NewAttachNS() (hostNS, contNS *ns.NetNS, dataDir string) {
	ginkgo.GinkgoHelper()
	return NewNS(), NewNS(), ginkgo.GinkgoT().TempDir()
}

// AddResult runs ADD c of p inside hostNS, fails the spec on an error, and
// returns the result, checked to be in spec version ver (the config's),
// converted to the current version.
func AddResult(hostNS *ns.NetNS, p plugin.Plugin, ver string, c Call) *current.Result {
	ginkgo.GinkgoHelper()
	out := MustRunIn(hostNS, p, c)
	return ParseResult(ver, out.Stdout)
}

// NewRemovableNS is NewNS for a spec that removes the namespace itself
// mid-way (DEL after the runtime destroyed it): it returns the namespace and
// the function that removes it, failing the spec if that fails. Removal is
// also registered with DeferCleanup, so a spec that fails before removing
// it leaves nothing behind.
func NewRemovableNS() (*ns.NetNS, func()) {
	ginkgo.GinkgoHelper()
	n, cleanup, err := CreateNS()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	ginkgo.DeferCleanup(cleanup)
	return n, func() {
		ginkgo.GinkgoHelper()
		gomega.Expect(cleanup()).To(gomega.Succeed())
	}
}
