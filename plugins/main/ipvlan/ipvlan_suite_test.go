package ipvlan_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestIPVlan(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "ipvlan")
}
