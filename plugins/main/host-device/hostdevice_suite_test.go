package hostdevice_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestHostDevice(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "host-device")
}
