// Package hostile_test execs every built plugin binary, as a runtime does
// (environment + stdin), with hostile and broken input: every key of a
// valid config with the wrong JSON type or out of range, names that would
// escape a folder, bad interface names, unknown versions, and prevResults
// of another version or naming interfaces that do not exist. Each must be
// answered with CNI error JSON carrying the right code and a message naming
// the key or value, and must change nothing in the namespaces and folders
// the test made.
package hostile_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestHostile(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Hostile and broken input across the suite")
}
