package macvlan_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestMacvlan(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "macvlan")
}
