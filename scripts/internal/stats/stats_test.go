package stats

import (
	"slices"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		in := slices.Clone(tc.in)
		if got := Median(in); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
		if !slices.Equal(in, tc.in) {
			t.Errorf("Median reordered its input: %v, was %v", in, tc.in)
		}
	}
	if got := Median([]time.Duration{3 * time.Second, time.Second}); got != 2*time.Second {
		t.Errorf("Median of 3s and 1s = %v, want 2s", got)
	}
}
