package vlan

import (
	"testing"

	"github.com/cniforge/plugins/pkg/testutil"
)

func TestParseConfig(t *testing.T) {
	tests := []testutil.ConfigCase[*netConf]{
		{Name: "required keys", Stdin: `{"name": "n", "type": "vlan", "master": "eth0", "vlanId": 100}`, Check: func(t *testing.T, c *netConf) {
			if c.id != 100 || c.Master != "eth0" || c.MTU != 0 || c.LinkInContainer || c.layer3 {
				t.Errorf("got %+v", c)
			}
		}},
		{Name: "every key", Stdin: `{"name": "n", "master": "eth0", "vlanId": 4094, "mtu": 1400, "linkInContainer": true, "ipam": {"type": "host-local"}, "dns": {"nameservers": ["10.0.0.1"]}}`, Check: func(t *testing.T, c *netConf) {
			if c.id != 4094 || c.MTU != 1400 || !c.LinkInContainer || !c.layer3 || len(c.DNS.Nameservers) != 1 {
				t.Errorf("got %+v", c)
			}
		}},
		{Name: "malformed", Stdin: `{"name": `, Code: 6, ErrHas: "parse config"},
		{Name: "wrong type", Stdin: `{"name": "n", "master": "eth0", "vlanId": "100"}`, Code: 7, ErrHas: `vlanId: "100" is not a whole number`},
		{Name: "no master", Stdin: `{"name": "n", "vlanId": 100}`, Code: 7, ErrHas: "master: missing"},
		{Name: "bad master", Stdin: `{"name": "n", "master": "a:b", "vlanId": 100}`, Code: 7, ErrHas: `master: "a:b"`},
		// Upstream's loadConf: 0-4094, and an absent key is 0.
		{Name: "no vlanId", Stdin: `{"name": "n", "master": "eth0"}`, Check: func(t *testing.T, c *netConf) {
			if c.id != 0 {
				t.Errorf("id %d, want 0", c.id)
			}
		}},
		{Name: "vlanId 0", Stdin: `{"name": "n", "master": "eth0", "vlanId": 0}`, Check: func(t *testing.T, c *netConf) {
			if c.id != 0 {
				t.Errorf("id %d, want 0", c.id)
			}
		}},
		{Name: "vlanId -1", Stdin: `{"name": "n", "master": "eth0", "vlanId": -1}`, Code: 7, ErrHas: "vlanId: -1 out of range 0-4094"},
		{Name: "vlanId 4095", Stdin: `{"name": "n", "master": "eth0", "vlanId": 4095}`, Code: 7, ErrHas: "vlanId: 4095"},
		{Name: "bad mtu", Stdin: `{"name": "n", "master": "eth0", "vlanId": 1, "mtu": 1}`, Code: 7, ErrHas: "mtu: 1"},
		{Name: "ipam without type", Stdin: `{"name": "n", "master": "eth0", "vlanId": 1, "ipam": {"subnet": "10.0.0.0/8"}}`, Code: 7, ErrHas: "ipam.type: missing"},
	}
	testutil.RunConfigCases(t, func(b []byte, _ string) (*netConf, error) { return parseConfig(b) }, tests)
}
