package hostlocal

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestHostLocal(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "host-local")
}
