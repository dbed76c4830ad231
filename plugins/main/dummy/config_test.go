package dummy

import (
	"strings"
	"testing"

	"github.com/cniforge/plugins/pkg/result"
)

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name, stdin string
		code        uint
		errHas      string
	}{
		{name: "ipam", stdin: `{"cniVersion": "1.0.0", "name": "n", "type": "dummy", "ipam": {"type": "host-local"}, "dns": {"nameservers": ["10.0.0.1"]}}`},
		{name: "malformed", stdin: `{"name": `, code: 6, errHas: "parse config"},
		{name: "no name", stdin: `{"ipam": {"type": "host-local"}}`, code: 7, errHas: "name: missing"},
		{name: "no ipam", stdin: `{"name": "n"}`, code: 7, errHas: "ipam: missing"},
		{name: "empty ipam", stdin: `{"name": "n", "ipam": {}}`, code: 7, errHas: "ipam.type: missing"},
		{name: "ipam type is a path", stdin: `{"name": "n", "ipam": {"type": "a/b"}}`, code: 7, errHas: "ipam.type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig([]byte(tt.stdin))
			if tt.code == 0 {
				if err != nil || c.IPAM.Type != "host-local" || len(c.DNS.Nameservers) != 1 {
					t.Fatalf("parseConfig: %+v, %v", c, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted %s", tt.stdin)
			}
			if got := result.Code(err); got != tt.code {
				t.Errorf("code %d, want %d (%v)", got, tt.code, err)
			}
			if !strings.Contains(err.Error(), tt.errHas) {
				t.Errorf("error %q does not name %q", err, tt.errHas)
			}
		})
	}
}
