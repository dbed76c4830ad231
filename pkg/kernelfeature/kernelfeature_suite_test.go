package kernelfeature_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestKernelFeature(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "pkg/kernelfeature")
}
