package sbr

import (
	"testing"

	"github.com/cniforge/plugins/pkg/testutil"
)

func TestParseConfig(t *testing.T) {
	const base = `{"cniVersion": "1.0.0", "name": "n", "type": "sbr"`
	testutil.RunConfigCases(t, func(stdin []byte, _ string) (*netConf, error) { return parseConfig(stdin) }, []testutil.ConfigCase[*netConf]{
		{Name: "defaults", Stdin: base + `}`},
		{Name: "table", Stdin: base + `, "table": 500}`},
		{Name: "gateways", Stdin: base + `, "gateways": ["10.0.0.1", "fd00::1"], "addSourceHints": true}`},
		{Name: "not JSON", Stdin: `[`, Code: 6},
		{Name: "table 0", Stdin: base + `, "table": 0}`, Code: 7, ErrHas: "table: 0"},
		{Name: "main table", Stdin: base + `, "table": 254}`, Code: 7, ErrHas: "table: 254"},
		{Name: "negative table", Stdin: base + `, "table": -3}`, Code: 7, ErrHas: "table: -3"},
		{Name: "bad gateway", Stdin: base + `, "gateways": ["10.0.0.300"]}`, Code: 7, ErrHas: `gateways[0]: "10.0.0.300"`},
		{Name: "two IPv4 gateways", Stdin: base + `, "gateways": ["10.0.0.1", "10.0.0.2"]}`, Code: 7, ErrHas: `gateways[1]`},
		{Name: "two IPv6 gateways", Stdin: base + `, "gateways": ["fd00::1", "fd00::2"]}`, Code: 7, ErrHas: `gateways[1]`},
	})
}
