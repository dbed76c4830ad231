package tuning_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestTuning(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "tuning")
}
