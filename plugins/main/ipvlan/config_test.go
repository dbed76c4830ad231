package ipvlan

import (
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/result"
)

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name, stdin string
		code        uint
		errHas      string
		check       func(*testing.T, *config)
	}{
		{name: "defaults", stdin: `{"name": "n", "type": "ipvlan", "ipam": {"type": "host-local"}}`, check: func(t *testing.T, c *config) {
			if c.mode != netlink.IPVLAN_MODE_L2 || c.modeStr != "l2" || c.Master != "" || c.MTU != 0 || c.LinkInContainer || !c.layer3 {
				t.Errorf("defaults: %+v", c)
			}
		}},
		{name: "every key", stdin: `{"name": "n", "master": "eth1", "mode": "l3s", "mtu": 1400, "linkInContainer": true, "dns": {"nameservers": ["10.0.0.1"]}}`, check: func(t *testing.T, c *config) {
			if c.mode != netlink.IPVLAN_MODE_L3S || c.Master != "eth1" || c.MTU != 1400 || !c.LinkInContainer || c.layer3 || len(c.DNS.Nameservers) != 1 {
				t.Errorf("got %+v", c)
			}
		}},
		{name: "l3", stdin: `{"name": "n", "mode": "l3", "ipam": {}}`, check: func(t *testing.T, c *config) {
			if c.mode != netlink.IPVLAN_MODE_L3 || c.layer3 {
				t.Errorf("got %+v", c)
			}
		}},
		{name: "malformed", stdin: `{"name": `, code: 6, errHas: "parse config"},
		{name: "wrong type", stdin: `{"name": "n", "mtu": "x"}`, code: 6, errHas: "mtu"},
		{name: "no name", stdin: `{}`, code: 7, errHas: "name: missing"},
		{name: "bad mode", stdin: `{"name": "n", "mode": "bridge"}`, code: 7, errHas: `mode: "bridge"`},
		{name: "bad master", stdin: `{"name": "n", "master": "a b"}`, code: 7, errHas: `master: "a b"`},
		{name: "bad mtu", stdin: `{"name": "n", "mtu": 70000}`, code: 7, errHas: "mtu: 70000"},
		{name: "ipam without type", stdin: `{"name": "n", "ipam": {"subnet": "10.0.0.0/8"}}`, code: 7, errHas: "ipam.type: missing"},
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
