package vrf

import (
	"strings"
	"testing"

	"github.com/cniforge/plugins/pkg/result"
)

func TestParseConfig(t *testing.T) {
	const base = `{"cniVersion": "1.0.0", "name": "n", "type": "vrf"`
	for _, tc := range []struct {
		name, stdin string
		code        uint
		msg         string
	}{
		{name: "name only", stdin: base + `, "vrfname": "blue"}`},
		{name: "with table", stdin: base + `, "vrfname": "blue", "table": 1001}`},
		{name: "not JSON", stdin: `{"vrfname": `, code: 6},
		{name: "vrfname not a string", stdin: `{"vrfname": 3}`, code: 7, msg: "vrfname: 3 is not a string"},
		{name: "no vrfname", stdin: base + `}`, code: 7, msg: "vrfname: missing"},
		{name: "vrfname too long", stdin: base + `, "vrfname": "a-very-long-vrf-name"}`, code: 7, msg: "vrfname"},
		{name: "vrfname with a slash", stdin: base + `, "vrfname": "a/b"}`, code: 7, msg: "vrfname"},
		{name: "table 252", stdin: base + `, "vrfname": "blue", "table": 252}`},
		{name: "default table", stdin: base + `, "vrfname": "blue", "table": 253}`, code: 7, msg: "table: 253"},
		{name: "main table", stdin: base + `, "vrfname": "blue", "table": 254}`, code: 7, msg: "table: 254"},
		{name: "local table", stdin: base + `, "vrfname": "blue", "table": 255}`, code: 7, msg: "table: 255"},
		{name: "table 256", stdin: base + `, "vrfname": "blue", "table": 256}`},
		{name: "negative table", stdin: base + `, "vrfname": "blue", "table": -1}`, code: 7, msg: "table: -1 is not a whole number"},
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
