package vrf

import (
	"testing"

	"github.com/cniforge/plugins/pkg/testutil"
)

func TestParseConfig(t *testing.T) {
	const base = `{"cniVersion": "1.0.0", "name": "n", "type": "vrf"`
	testutil.RunConfigCases(t, func(stdin []byte, _ string) (*netConf, error) { return parseConfig(stdin) }, []testutil.ConfigCase[*netConf]{
		{Name: "name only", Stdin: base + `, "vrfname": "blue"}`},
		{Name: "with table", Stdin: base + `, "vrfname": "blue", "table": 1001}`},
		{Name: "not JSON", Stdin: `{"vrfname": `, Code: 6},
		{Name: "vrfname not a string", Stdin: `{"vrfname": 3}`, Code: 7, ErrHas: "vrfname: 3 is not a string"},
		{Name: "no vrfname", Stdin: base + `}`, Code: 7, ErrHas: "vrfname: missing"},
		{Name: "vrfname too long", Stdin: base + `, "vrfname": "a-very-long-vrf-name"}`, Code: 7, ErrHas: "vrfname"},
		{Name: "vrfname with a slash", Stdin: base + `, "vrfname": "a/b"}`, Code: 7, ErrHas: "vrfname"},
		{Name: "table 252", Stdin: base + `, "vrfname": "blue", "table": 252}`},
		{Name: "default table", Stdin: base + `, "vrfname": "blue", "table": 253}`, Code: 7, ErrHas: "table: 253"},
		{Name: "main table", Stdin: base + `, "vrfname": "blue", "table": 254}`, Code: 7, ErrHas: "table: 254"},
		{Name: "local table", Stdin: base + `, "vrfname": "blue", "table": 255}`, Code: 7, ErrHas: "table: 255"},
		{Name: "table 256", Stdin: base + `, "vrfname": "blue", "table": 256}`},
		{Name: "negative table", Stdin: base + `, "vrfname": "blue", "table": -1}`, Code: 7, ErrHas: "table: -1 is not a whole number"},
	})
}
