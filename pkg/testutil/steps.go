package testutil

import (
	"errors"
	"fmt"

	"github.com/onsi/ginkgo/v2"
)

// ErrInjected is the failure FailAfter injects; the plugin's error wraps
// its text: `injected failure after step "veth"`.
var ErrInjected = errors.New("injected failure")

// FailAfter returns the step hook (attach.Hooks.AfterStep) that makes ADD
// fail right after step, as a kernel error there would: the
// failure-injection half of the step-failure table. before, when set, runs
// first, to change the kernel under the failing ADD as a concurrent ADD
// would. (A function, not attach.Hooks: pkg/netfilter's own tests use
// testutil, and pkg/attach imports pkg/netfilter.)
func FailAfter(step string, before func()) func(string) error {
	return func(s string) error {
		if s != step {
			return nil
		}
		if before != nil {
			before()
		}
		return fmt.Errorf("%w after step %q", ErrInjected, s)
	}
}

// PanicAfter returns the step hook that makes ADD panic right after step:
// the frame must roll back as for an error and answer code 999.
func PanicAfter(step string) func(string) error {
	return func(s string) error {
		if s == step {
			panic(fmt.Sprintf("injected panic after step %q", s))
		}
		return nil
	}
}

// StepEntries is the step-failure table: one Ginkgo entry per ADD step,
// passing the step's name, for DescribeTable/DescribeTableSubtree.
func StepEntries(steps []string) []ginkgo.TableEntry {
	es := make([]ginkgo.TableEntry, 0, len(steps))
	for _, s := range steps {
		es = append(es, ginkgo.Entry(s, s))
	}
	return es
}
