package macspoof

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestMacspoof(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "netfilter/macspoof")
}
