package testutil

import (
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ns"
)

// NewRemovableNS is NewNS for a spec that removes the namespace itself
// mid-way (DEL after the runtime destroyed it): it returns the namespace and
// the function that removes it, failing the spec if that fails. Removal is
// also registered with DeferCleanup, so a spec that fails before removing
// it leaves nothing behind (removing twice is harmless, see CreateNS).
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
