package iptnft

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestIptnft(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "netfilter/iptnft")
}
