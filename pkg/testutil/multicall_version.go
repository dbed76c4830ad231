package testutil

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cniforge/plugins/pkg/plugin"
)

// MulticallVersion checks what `<binary> version` prints for m: its name
// and the suite's version first, then the plugins line `cniforge install`
// reads to know which links to point at the binary.
func MulticallVersion(t *testing.T, m plugin.Multicall, binary, plugins string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if rc := m.Run([]string{"version"}, &stdout, &stderr); rc != 0 {
		t.Fatalf("%s version: exit %d: %s", binary, rc, stderr.String())
	}
	lines := strings.Split(stdout.String(), "\n")
	if len(lines) < 2 || lines[0] != binary+" "+plugin.SuiteVersion() || lines[1] != "plugins: "+plugins {
		t.Errorf("%s version printed %q, want %q then %q", binary, stdout.String(), binary+" "+plugin.SuiteVersion(), "plugins: "+plugins)
	}
}
