package testutil

import (
	"strings"
	"testing"

	"github.com/cniforge/plugins/pkg/result"
)

// ConfigCase is one row of a plugin's parseConfig table: stdin (and
// CNI_ARGS), and either Code with a piece of the error (ErrHas) or, for a
// config that parses (Code 0), Check of what it parsed to.
type ConfigCase[C any] struct {
	Name, Stdin, CNIArgs string
	Code                 uint
	ErrHas               string
	Check                func(*testing.T, C)
}

// RunConfigCases runs each case as a subtest of t: parse must accept a
// Code 0 case (then Check, when set, looks at the result) and refuse any
// other with that CNI code and an error naming ErrHas.
func RunConfigCases[C any](t *testing.T, parse func(stdin []byte, cniArgs string) (C, error), cases []ConfigCase[C]) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.Name, func(t *testing.T) {
			c, err := parse([]byte(tt.Stdin), tt.CNIArgs)
			if tt.Code == 0 {
				if err != nil {
					t.Fatalf("parseConfig: %v", err)
				}
				if tt.Check != nil {
					tt.Check(t, c)
				}
				return
			}
			if err == nil {
				t.Fatalf("parseConfig accepted %s", tt.Stdin)
			}
			if got := result.Code(err); got != tt.Code {
				t.Errorf("code %d, want %d (%v)", got, tt.Code, err)
			}
			if !strings.Contains(err.Error(), tt.ErrHas) {
				t.Errorf("error %q does not name %q", err, tt.ErrHas)
			}
		})
	}
}
