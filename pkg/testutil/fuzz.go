package testutil

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"runtime/debug"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/cniforge/plugins/pkg/result"
)

// FuzzTimeout bounds one call of a fuzzed function. A parser takes
// microseconds; the bound is loose because the fuzz workers share a busy
// machine, and tight enough that a loop on some input shows up as a
// finding instead of a stuck run.
const FuzzTimeout = 10 * time.Second

// Bounded runs fn on its own goroutine and fails t when fn panics (with
// the panic's value and stack) or has not returned within FuzzTimeout (a
// hang). what names the call in the failure.
func Bounded(t testing.TB, what string, fn func()) {
	t.Helper()
	type panicked struct {
		value any
		stack []byte
	}
	done := make(chan *panicked, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- &panicked{v, debug.Stack()}
			}
		}()
		fn()
		done <- nil
	}()
	timer := time.NewTimer(FuzzTimeout)
	defer timer.Stop()
	select {
	case p := <-done:
		if p != nil {
			t.Fatalf("%s panicked: %v\n%s", what, p.value, p.stack)
		}
	case <-timer.C:
		t.Fatalf("%s: no return within %s (a hang)", what, FuzzTimeout)
	}
}

// stackTrace matches what a Go stack trace or panic text carries.
var stackTrace = regexp.MustCompile(`goroutine \d+ \[|\.go:\d+|runtime/debug\.|^panic: |\npanic: `)

// CheckCNIError fails t unless err, flattened as pkg/plugin flattens every
// command's error before skel prints it (result.Flatten), is a CNI error
// with a non-zero code and a message, free of any Go stack trace. nil
// passes. A parser's error must carry its own code: one without (which the
// runtime would see as 999) fails too, as does 999 itself, since parsing
// is never an internal failure.
func CheckCNIError(t testing.TB, what string, err error) {
	t.Helper()
	checkCNIError(t, what, err, false)
}

// CheckCNIErrorAllow999 is CheckCNIError for code that reads state a
// previous command left on disk, where an I/O failure may have no better
// code than 999: the error must still be a *types.Error once flattened,
// with a message and no stack.
func CheckCNIErrorAllow999(t testing.TB, what string, err error) {
	t.Helper()
	checkCNIError(t, what, err, true)
}

func checkCNIError(t testing.TB, what string, err error, allow999 bool) {
	t.Helper()
	if err == nil {
		return
	}
	flat := result.Flatten(err)
	e, ok := flat.(*types.Error)
	switch {
	case !ok && !allow999:
		t.Fatalf("%s: error carries no CNI code (the runtime would get 999): %v", what, err)
	case !ok:
		e = &types.Error{Code: types.ErrInternal, Msg: flat.Error()}
	}
	if e.Code == 0 || (e.Code == types.ErrInternal && !allow999) {
		t.Fatalf("%s: CNI error with code %d: %q (%q)", what, e.Code, e.Msg, e.Details)
	}
	if e.Msg == "" {
		t.Fatalf("%s: CNI error %d without a message", what, e.Code)
	}
	if stackTrace.MatchString(e.Msg) || stackTrace.MatchString(e.Details) {
		t.Fatalf("%s: CNI error %d carries a Go stack trace: %q (%q)", what, e.Code, e.Msg, e.Details)
	}
	if _, err := json.Marshal(e); err != nil {
		t.Fatalf("%s: CNI error %d does not encode as JSON: %v", what, e.Code, err)
	}
}

// FuzzConfig fuzzes a plugin's config parsing with its two untrusted
// inputs, stdin (the whole network config, with prevResult, runtimeConfig
// and args) and CNI_ARGS. parse is what the plugin does with them before
// it touches anything; it returns the parsed value (compared between two
// calls: parsing is deterministic) or the error the runtime would see.
//
// Every input must: return within FuzzTimeout, not panic, and fail (if it
// fails) with a CNI error (CheckCNIError). seeds are added to the corpus
// besides testdata/fuzz/<target>/, which holds the configs the tests use
// (see RecordCall).
func FuzzConfig(f *testing.F, parse func(stdin []byte, cniArgs string) (any, error), seeds ...string) {
	f.Helper()
	for _, s := range seeds {
		f.Add([]byte(s), "")
	}
	f.Fuzz(func(t *testing.T, stdin []byte, cniArgs string) {
		FuzzOnce(t, func() (any, error) { return parse(stdin, cniArgs) })
	})
}

// FuzzOnce checks one input of a parser: parse, bounded (Bounded), fails
// with a CNI error if it fails (CheckCNIError), and a second call agrees
// with the first (CheckSame).
func FuzzOnce(t *testing.T, parse func() (any, error)) {
	t.Helper()
	var first, again any
	var err1, err2 error
	Bounded(t, "parse", func() { first, err1 = parse() })
	CheckCNIError(t, "parse", err1)
	Bounded(t, "parse again", func() { again, err2 = parse() })
	CheckSame(t, first, err1, again, err2)
}

// CheckSame fails t unless two parses of one input agree: the same error
// text, or equal values.
func CheckSame(t testing.TB, a any, errA error, b any, errB error) {
	t.Helper()
	if fmt.Sprint(errA) != fmt.Sprint(errB) {
		t.Fatalf("parsing twice disagrees: %v, then %v", errA, errB)
	}
	if errA == nil && !reflect.DeepEqual(a, b) {
		t.Fatalf("parsing twice disagrees:\n%#v\n%#v", a, b)
	}
}

// prevParser is a parsed config that parses its prevResult on demand, as
// attach.NetConf does (testutil must not import pkg/attach).
type prevParser interface {
	Prev() (*current.Result, error)
}

// FuzzFrameConfig is FuzzConfig for a plugin written on pkg/attach's
// frame: parse is the plugin's Parse, which every verb runs first, and
// then prevResult is parsed as ADD of a chained plugin and CHECK parse it.
func FuzzFrameConfig[C prevParser](f *testing.F, parse func(*skel.CmdArgs) (C, error), seeds ...string) {
	f.Helper()
	FuzzConfig(f, func(stdin []byte, cniArgs string) (any, error) {
		c, err := parse(FuzzArgs(stdin, cniArgs))
		if err != nil {
			return nil, err
		}
		prev, err := c.Prev()
		if err != nil {
			return nil, err
		}
		return []any{c, prev}, nil
	}, seeds...)
}

// FuzzArgs is the skel arguments of a fuzzed call: stdin and CNI_ARGS
// from the fuzzer, the rest fixed and valid.
func FuzzArgs(stdin []byte, cniArgs string) *skel.CmdArgs {
	return &skel.CmdArgs{
		ContainerID: "fuzz-container",
		Netns:       "/var/run/netns/cniforge-test-fuzz",
		IfName:      "eth0",
		Args:        cniArgs,
		Path:        "/opt/cni/bin",
		StdinData:   stdin,
	}
}
