package nft

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/netfilter/hostport/internal/pmtest"
)

func TestNFT(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "netfilter/hostport/nft")
}

// manyMappings and portMapOpts are pmtest's, under the names the specs
// use.
var (
	manyMappings = pmtest.ManyMappings
	portMapOpts  = pmtest.PortMapOpts
)
