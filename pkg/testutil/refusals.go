package testutil

import (
	"github.com/containernetworking/cni/pkg/types"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
)

// RefusalSpecs declares, in the calling container, the specs every
// plugin's suite has for an ADD the frame refuses before touching the
// kernel: malformed JSON (code 6), no CNI_CONTAINERID (code 4, naming it)
// and an unsupported cniVersion (code 1). run runs a call; add is a valid
// ADD at cniVersion ver; unchanged checks that nothing was made.
func RefusalSpecs(run func(Call) Output, add func(ver string) Call, unchanged func()) {
	refused := func(c Call, code uint, names string) {
		ginkgo.GinkgoHelper()
		out := run(c)
		gomega.Expect(out.Err).NotTo(gomega.BeNil())
		gomega.Expect(out.Err.Code).To(gomega.BeEquivalentTo(code))
		gomega.Expect(out.Err.Msg + out.Err.Details).To(gomega.ContainSubstring(names))
		unchanged()
	}
	ginkgo.It("rejects malformed JSON with code 6", func() {
		c := add("1.1.0")
		c.Stdin = []byte(`{"cniVersion": "1.1.0", "name": `)
		refused(c, types.ErrDecodingFailure, "")
	})
	ginkgo.It("rejects a missing CNI_CONTAINERID with code 4", func() {
		c := add("1.1.0")
		c.ContainerID = ""
		refused(c, types.ErrInvalidEnvironmentVariables, "CNI_CONTAINERID")
	})
	ginkgo.It("rejects an unsupported cniVersion with code 1", func() {
		refused(add("9.9.9"), types.ErrIncompatibleCNIVersion, "")
	})
}
