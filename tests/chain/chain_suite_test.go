// Package chain_test runs conflists of cniforge plugins through libcni,
// the way a runtime does, with the built binaries.
package chain_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestChain(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "chains through libcni")
}
