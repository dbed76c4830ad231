package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// `cniforge-light version` is what cniforge install reads to know which
// links to point here: its second line lists every plugin it holds.
func TestVersionListsItsPlugins(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if rc := run([]string{"version"}, &stdout, &stderr); rc != 0 {
		t.Fatalf("version: exit %d: %s", rc, stderr.String())
	}
	lines := strings.Split(stdout.String(), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "cniforge-light ") || lines[1] != "plugins: loopback sbr static tuning vrf" {
		t.Errorf("version printed %q", stdout.String())
	}
}

// Run as a type it does not hold, with CNI_COMMAND set, it answers as a
// plugin that does not exist: code 7, naming the type.
func TestNoSuchPlugin(t *testing.T) {
	var stdout bytes.Buffer
	if rc := noSuchPlugin("bridge", "ADD", &stdout); rc != 1 {
		t.Errorf("exit %d, want 1", rc)
	}
	var e struct {
		Code int    `json:"code"`
		Msg  string `json:"msg"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &e); err != nil || e.Code != 7 || !strings.Contains(e.Msg, `"bridge"`) {
		t.Errorf("got %q (%v), want code 7 naming bridge", stdout.String(), err)
	}
}
