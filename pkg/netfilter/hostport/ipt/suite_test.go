package ipt

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/netfilter/hostport/internal/pmtest"
)

func TestIPT(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "netfilter/hostport/ipt")
}

// manyMappings and portMapOpts are pmtest's, under the names the specs
// use.
var (
	manyMappings = pmtest.ManyMappings
	portMapOpts  = pmtest.PortMapOpts
)
