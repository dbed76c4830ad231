package portmap_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestPortmap(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "portmap")
}
