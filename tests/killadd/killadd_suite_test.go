package killadd

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/testutil"
)

func TestKillAdd(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "kill during ADD")
}

var _ = BeforeSuite(func() {
	// A kill orphans the IPAM child; as its subreaper the test can wait
	// for it to be gone before DEL runs, so every trial starts clean.
	Expect(testutil.BecomeSubreaper()).To(Succeed())
})
