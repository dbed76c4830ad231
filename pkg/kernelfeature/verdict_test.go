package kernelfeature_test

import (
	"errors"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/kernelfeature"
)

var _ = Describe("what Require does with a probe result", func() {
	missing := errors.New("add ipvlan \"ipvl0\": operation not supported")

	It("does nothing when the kernel has the feature, in or out of the lane", func() {
		for _, inLane := range []bool{false, true} {
			msg, fail := kernelfeature.Verdict(kernelfeature.IPVlan, nil, inLane)
			Expect(msg).To(BeEmpty())
			Expect(fail).To(BeFalse())
		}
	})

	It("skips outside the lane, naming the feature, the failure and the lane", func() {
		msg, fail := kernelfeature.Verdict(kernelfeature.IPVlan, missing, false)
		Expect(fail).To(BeFalse())
		Expect(msg).To(HavePrefix("kernel lacks ipvlan (creating ipvlan links (l2 and l3) on a veth failed: "))
		Expect(msg).To(ContainSubstring("operation not supported"))
		Expect(msg).To(ContainSubstring("runs in the VM lane: scripts/vmtest.sh"))
	})

	It("fails inside the lane, where a skip would hide a missing feature", func() {
		msg, fail := kernelfeature.Verdict(kernelfeature.VRF, missing, true)
		Expect(fail).To(BeTrue())
		Expect(msg).To(HavePrefix("kernel lacks vrf inside the VM lane (CNIFORGE_VM_LANE=1)"))
		Expect(msg).To(ContainSubstring("operation not supported"))
	})

	It("knows every feature by a distinct name", func() {
		seen := map[string]bool{}
		for _, f := range kernelfeature.All {
			Expect(f.Name).NotTo(BeEmpty())
			Expect(seen).NotTo(HaveKey(f.Name))
			seen[f.Name] = true
		}
		Expect(seen).To(HaveLen(6))
	})
})
