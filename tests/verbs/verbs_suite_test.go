// Package verbs_test execs every built plugin binary the way a runtime's GC
// and STATUS do: with only CNI_COMMAND and CNI_PATH set (spec 1.1.0 requires
// no container ID, netns or ifname for these verbs), and with a network that
// holds a leaked attachment, which GC with no list must release.
package verbs_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestVerbs(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "GC and STATUS across the suite")
}
