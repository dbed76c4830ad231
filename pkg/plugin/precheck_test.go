package plugin

import (
	"strings"
	"testing"
)

func TestPrecheck(t *testing.T) {
	const ok = `{"cniVersion": "1.1.0", "name": "n"}`
	for _, tc := range []struct {
		name  string
		env   map[string]string
		stdin string
		code  uint   // 0: no refusal
		names string // the message names it
	}{
		{"valid", map[string]string{"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "c1", "CNI_IFNAME": "eth0"}, ok, 0, ""},
		{"ifname too long", map[string]string{"CNI_COMMAND": "ADD", "CNI_IFNAME": "eth0123456789abc"}, ok, 4, `CNI_IFNAME: "eth0123456789abc"`},
		{"ifname with slash", map[string]string{"CNI_COMMAND": "DEL", "CNI_IFNAME": "../x"}, ok, 4, `CNI_IFNAME: "../x"`},
		{"ifname dotdot", map[string]string{"CNI_COMMAND": "CHECK", "CNI_IFNAME": ".."}, ok, 4, `CNI_IFNAME: ".."`},
		{"container ID escape", map[string]string{"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "../etc"}, ok, 4, `CNI_CONTAINERID: "../etc"`},
		{"GC ignores ifname", map[string]string{"CNI_COMMAND": "GC", "CNI_IFNAME": "a/b"}, ok, 0, ""},
		{"unknown version", map[string]string{"CNI_COMMAND": "ADD"}, `{"cniVersion": "9.9.9", "name": "n"}`, 1, `cniVersion: "9.9.9"`},
		{"unknown version on CHECK", map[string]string{"CNI_COMMAND": "CHECK"}, `{"cniVersion": "v1.0.0", "name": "n"}`, 1, `cniVersion: "v1.0.0"`},
		{"unknown version on GC", map[string]string{"CNI_COMMAND": "GC"}, `{"cniVersion": "1.1", "name": "n"}`, 1, `cniVersion: "1.1"`},
		{"name longer than a file name", map[string]string{"CNI_COMMAND": "ADD"}, `{"cniVersion": "1.1.0", "name": "` + strings.Repeat("n", 256) + `"}`, 7, "name: 256 bytes"},
		{"name of 255 bytes", map[string]string{"CNI_COMMAND": "ADD"}, `{"cniVersion": "1.1.0", "name": "` + strings.Repeat("n", 255) + `"}`, 0, ""},
		{"no version is 0.1.0", map[string]string{"CNI_COMMAND": "ADD"}, `{"name": "n"}`, 0, ""},
		{"not JSON: left to skel", map[string]string{"CNI_COMMAND": "ADD"}, `{"cniVersion": `, 0, ""},
		{"cniVersion of the wrong type", map[string]string{"CNI_COMMAND": "ADD"}, `{"cniVersion": 1}`, 7, "cniVersion: 1 is not a string"},
		{"name of the wrong type", map[string]string{"CNI_COMMAND": "DEL"}, `{"cniVersion": "1.1.0", "name": ["n"]}`, 7, "name: a list is not a string"},
		{"VERSION reads no stdin", map[string]string{"CNI_COMMAND": "VERSION"}, `{"cniVersion": "9.9.9"}`, 0, ""},
		{"no command: about text", map[string]string{}, `{"cniVersion": "9.9.9"}`, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := precheck(AllVersions, func(k string) string { return tc.env[k] }, []byte(tc.stdin))
			if tc.code == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted, want code %d", tc.code)
			}
			if err.Code != tc.code || !strings.Contains(err.Msg, tc.names) {
				t.Fatalf("got code %d %q, want code %d naming %s", err.Code, err.Msg, tc.code, tc.names)
			}
		})
	}
}
