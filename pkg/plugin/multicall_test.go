package plugin

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// Run as a type it does not hold, with CNI_COMMAND set, a multicall binary
// answers as a plugin that does not exist: code 7, naming the type and
// what it holds.
func TestNoSuchPlugin(t *testing.T) {
	var stdout bytes.Buffer
	if rc := NoSuchPlugin(&stdout, "cniforge-light", "bridge", "ADD", []string{"loopback", "sbr"}, "the other plugins are in cniforge"); rc != 1 {
		t.Errorf("exit %d, want 1", rc)
	}
	var e struct {
		Code    int    `json:"code"`
		Msg     string `json:"msg"`
		Details string `json:"details"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &e); err != nil || e.Code != 7 || !strings.Contains(e.Msg, `"bridge"`) ||
		e.Details != "it holds: loopback sbr; the other plugins are in cniforge" {
		t.Errorf("got %q (%v), want code 7 naming bridge and what it holds", stdout.String(), err)
	}
}

// A companion's command line: help on stdout with exit 0 when asked for,
// on stderr with exit 2 for anything else; both name its plugins.
func TestMulticallHelp(t *testing.T) {
	m := Multicall{Binary: "cniforge-x", About: "x", Plugins: func() []Plugin { return []Plugin{{Name: "a"}, {Name: "b"}} }}
	for _, c := range []struct {
		args     []string
		rc       int
		toStdout bool
	}{{[]string{"help"}, 0, true}, {[]string{"--help"}, 0, true}, {nil, 2, false}, {[]string{"install"}, 2, false}} {
		var stdout, stderr bytes.Buffer
		rc := m.Run(c.args, &stdout, &stderr)
		got := stderr.String()
		if c.toStdout {
			got = stdout.String()
		}
		if rc != c.rc || !strings.Contains(got, "plugins: a b") || !strings.HasPrefix(got, "cniforge-x ") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d and the usage on the right stream", c.args, rc, stdout.String(), stderr.String(), c.rc)
		}
	}
}
