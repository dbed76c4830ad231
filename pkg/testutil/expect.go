package testutil

import (
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
)

// ExpectCode fails the spec unless the plugin reported a CNI error in out
// whose code is equivalent to code; description is added to the failure
// as gomega does.
func ExpectCode(out Output, code any, description ...any) {
	ginkgo.GinkgoHelper()
	gomega.Expect(out.Err).NotTo(gomega.BeNil())
	gomega.Expect(out.Err.Code).To(gomega.BeEquivalentTo(code), description...)
}
