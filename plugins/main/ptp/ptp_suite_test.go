package ptp_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestPTP(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "ptp")
}
