package sbr

import (
	"strings"
	"testing"

	"github.com/cniforge/plugins/pkg/result"
)

func TestParseConfig(t *testing.T) {
	const base = `{"cniVersion": "1.0.0", "name": "n", "type": "sbr"`
	for _, tc := range []struct {
		name, stdin string
		code        uint
		msg         string
	}{
		{name: "defaults", stdin: base + `}`},
		{name: "table", stdin: base + `, "table": 500}`},
		{name: "gateways", stdin: base + `, "gateways": ["10.0.0.1", "fd00::1"], "addSourceHints": true}`},
		{name: "not JSON", stdin: `[`, code: 6},
		{name: "table 0", stdin: base + `, "table": 0}`, code: 7, msg: "table: 0"},
		{name: "main table", stdin: base + `, "table": 254}`, code: 7, msg: "table: 254"},
		{name: "negative table", stdin: base + `, "table": -3}`, code: 7, msg: "table: -3"},
		{name: "bad gateway", stdin: base + `, "gateways": ["10.0.0.300"]}`, code: 7, msg: `gateways[0]: "10.0.0.300"`},
		{name: "two IPv4 gateways", stdin: base + `, "gateways": ["10.0.0.1", "10.0.0.2"]}`, code: 7, msg: `gateways[1]`},
		{name: "two IPv6 gateways", stdin: base + `, "gateways": ["fd00::1", "fd00::2"]}`, code: 7, msg: `gateways[1]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseConfig([]byte(tc.stdin))
			if tc.code == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || result.Code(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("err %v (code %d), want code %d naming %q", err, result.Code(err), tc.code, tc.msg)
			}
		})
	}
}
