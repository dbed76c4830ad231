package hostport

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestHostport(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "netfilter/hostport")
}
