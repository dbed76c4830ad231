package bandwidth_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestBandwidth(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "bandwidth")
}
