package dhcp

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestDHCP(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "dhcp")
}
