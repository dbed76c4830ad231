package backends

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/netfilter/hostport/internal/pmtest"
)

func TestBackends(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "netfilter/hostport/backends")
}

// manyMappings is pmtest.ManyMappings, under the name the specs use.
var manyMappings = pmtest.ManyMappings
