package sbr_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestSBR(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "sbr")
}
