package vrf_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestVRF(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "vrf")
}
