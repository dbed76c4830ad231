package netfilter

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestNetfilter(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "netfilter")
}
