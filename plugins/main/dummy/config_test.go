package dummy

import (
	"testing"

	"github.com/cniforge/plugins/pkg/testutil"
)

func TestParseConfig(t *testing.T) {
	tests := []testutil.ConfigCase[*netConf]{
		{Name: "ipam", Stdin: `{"cniVersion": "1.0.0", "name": "n", "type": "dummy", "ipam": {"type": "host-local"}, "dns": {"nameservers": ["10.0.0.1"]}}`, Check: func(t *testing.T, c *netConf) {
			if c.IPAM.Type != "host-local" || len(c.DNS.Nameservers) != 1 {
				t.Errorf("got %+v", c)
			}
		}},
		{Name: "malformed", Stdin: `{"name": `, Code: 6, ErrHas: "parse config"},
		{Name: "no name", Stdin: `{"ipam": {"type": "host-local"}}`, Code: 7, ErrHas: "name: missing"},
		{Name: "no ipam", Stdin: `{"name": "n"}`, Code: 7, ErrHas: "ipam: missing"},
		{Name: "empty ipam", Stdin: `{"name": "n", "ipam": {}}`, Code: 7, ErrHas: "ipam.type: missing"},
		{Name: "ipam type is a path", Stdin: `{"name": "n", "ipam": {"type": "a/b"}}`, Code: 7, ErrHas: "ipam.type"},
	}
	testutil.RunConfigCases(t, func(b []byte, _ string) (*netConf, error) { return parseConfig(b) }, tests)
}
