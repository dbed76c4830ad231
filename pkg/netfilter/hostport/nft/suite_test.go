package nft

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestNFT(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "netfilter/hostport/nft")
}
