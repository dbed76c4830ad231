package testutil_test

import (
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/cniforge/plugins/pkg/testutil"
)

// verdict records whether a check failed the test, instead of failing it.
type verdict struct {
	testing.TB
	failed string
}

func (v *verdict) Helper() {}
func (v *verdict) Fatalf(format string, args ...any) {
	v.failed = fmt.Sprintf(format, args...)
	runtime.Goexit() // as the real Fatalf: nothing after it runs
}

// judge runs check against a verdict on its own goroutine (Fatalf ends it)
// and returns the failure message, "" when the check passed.
func judge(check func(testing.TB)) string {
	v := &verdict{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(v)
	}()
	<-done
	return v.failed
}

func TestCheckCNIError(t *testing.T) {
	coded := types.NewError(types.ErrInvalidNetworkConfig, "mtu: 5 out of range 68-65535", "")
	for _, c := range []struct {
		name     string
		err      error
		allow999 bool
		fails    bool
	}{
		{"nil", nil, false, false},
		{"code 7", coded, false, false},
		{"code 7 wrapped", fmt.Errorf("ipam host-local ADD: %w", coded), false, false},
		{"no code", errors.New("parse: boom"), false, true},
		{"no code, 999 allowed", errors.New("read index: EIO"), true, false},
		{"999", types.NewError(types.ErrInternal, "panic: x", ""), false, true},
		{"999 allowed", types.NewError(types.ErrInternal, "read index: EIO", ""), true, false},
		{"code 0", &types.Error{Msg: "delegate failed"}, true, false}, // Flatten makes it 999
		{"code 0, 999 refused", &types.Error{Msg: "delegate failed"}, false, true},
		{"no message", types.NewError(types.ErrInvalidNetworkConfig, "", ""), false, true},
		{"stack in message", types.NewError(types.ErrInvalidNetworkConfig, "goroutine 7 [running]:\nmain.go:12", ""), false, true},
		{"stack in details", types.NewError(types.ErrDecodingFailure, "bad", "x/y.go:12 +0x3d"), false, true},
	} {
		got := judge(func(tb testing.TB) {
			if c.allow999 {
				testutil.CheckCNIErrorAllow999(tb, c.name, c.err)
			} else {
				testutil.CheckCNIError(tb, c.name, c.err)
			}
		})
		if (got != "") != c.fails {
			t.Errorf("%s: failed=%v (%q), want failed=%v", c.name, got != "", got, c.fails)
		}
	}
}

func TestBounded(t *testing.T) {
	if got := judge(func(tb testing.TB) { testutil.Bounded(tb, "fine", func() {}) }); got != "" {
		t.Errorf("a call that returns failed: %s", got)
	}
	got := judge(func(tb testing.TB) {
		testutil.Bounded(tb, "parse", func() {
			var m map[string]int
			m["x"] = 1 // a nil map write panics
		})
	})
	if got == "" {
		t.Errorf("a panicking call passed")
	}
	// A hang is not waited for here (FuzzTimeout is long); that path is a
	// select on a timer beside the one tested above.
}

func TestCheckSame(t *testing.T) {
	if got := judge(func(tb testing.TB) { testutil.CheckSame(tb, []int{1}, nil, []int{1}, nil) }); got != "" {
		t.Errorf("equal parses failed: %s", got)
	}
	if got := judge(func(tb testing.TB) { testutil.CheckSame(tb, []int{1}, nil, []int{2}, nil) }); got == "" {
		t.Errorf("different values passed")
	}
	if got := judge(func(tb testing.TB) { testutil.CheckSame(tb, nil, errors.New("a"), nil, errors.New("b")) }); got == "" {
		t.Errorf("different errors passed")
	}
}
