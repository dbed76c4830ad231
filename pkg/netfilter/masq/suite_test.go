package masq

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestMasq(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "netfilter/masq")
}
