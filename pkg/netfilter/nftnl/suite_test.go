package nftnl

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestNftnl(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "netfilter/nftnl")
}
