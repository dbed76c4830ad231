// Package stats holds the arithmetic the benchmark commands share. It
// links no test code and touches nothing: a tool that only measures
// execs (scripts/startbench) imports it rather than benchnode, which makes
// network namespaces through pkg/testutil and so links the test framework.
package stats

import "slices"

// Median is the middle of v, or the mean of the middle two; v is not
// reordered. v must not be empty.
func Median[T ~int64 | ~float64](v []T) T {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}
