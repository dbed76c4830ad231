package ns_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestNS(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "pkg/ns")
}
