package vlan

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
		check       func(*testing.T, *netConf)
	}{
		{name: "required keys", stdin: `{"name": "n", "type": "vlan", "master": "eth0", "vlanId": 100}`, check: func(t *testing.T, c *netConf) {
			if c.id != 100 || c.Master != "eth0" || c.MTU != 0 || c.LinkInContainer || c.layer3 {
				t.Errorf("got %+v", c)
			}
		}},
		{name: "every key", stdin: `{"name": "n", "master": "eth0", "vlanId": 4094, "mtu": 1400, "linkInContainer": true, "ipam": {"type": "host-local"}, "dns": {"nameservers": ["10.0.0.1"]}}`, check: func(t *testing.T, c *netConf) {
			if c.id != 4094 || c.MTU != 1400 || !c.LinkInContainer || !c.layer3 || len(c.DNS.Nameservers) != 1 {
				t.Errorf("got %+v", c)
			}
		}},
		{name: "malformed", stdin: `{"name": `, code: 6, errHas: "parse config"},
		{name: "wrong type", stdin: `{"name": "n", "master": "eth0", "vlanId": "100"}`, code: 6, errHas: "vlanId"},
		{name: "no master", stdin: `{"name": "n", "vlanId": 100}`, code: 7, errHas: "master: missing"},
		{name: "bad master", stdin: `{"name": "n", "master": "a:b", "vlanId": 100}`, code: 7, errHas: `master: "a:b"`},
		{name: "no vlanId", stdin: `{"name": "n", "master": "eth0"}`, code: 7, errHas: "vlanId: missing"},
		{name: "vlanId 0", stdin: `{"name": "n", "master": "eth0", "vlanId": 0}`, code: 7, errHas: "vlanId: 0 out of range 1-4094"},
		{name: "vlanId 4095", stdin: `{"name": "n", "master": "eth0", "vlanId": 4095}`, code: 7, errHas: "vlanId: 4095"},
		{name: "bad mtu", stdin: `{"name": "n", "master": "eth0", "vlanId": 1, "mtu": 1}`, code: 7, errHas: "mtu: 1"},
		{name: "ipam without type", stdin: `{"name": "n", "master": "eth0", "vlanId": 1, "ipam": {"subnet": "10.0.0.0/8"}}`, code: 7, errHas: "ipam.type: missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig([]byte(tt.stdin))
			if tt.code == 0 {
				if err != nil {
					t.Fatal(err)
				}
				tt.check(t, c)
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
