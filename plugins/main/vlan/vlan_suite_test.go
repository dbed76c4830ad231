package vlan_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestVlan(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "vlan")
}
