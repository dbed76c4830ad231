package ipvlan

import (
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/testutil"
)

func TestParseConfig(t *testing.T) {
	tests := []testutil.ConfigCase[*config]{
		{Name: "defaults", Stdin: `{"name": "n", "type": "ipvlan", "ipam": {"type": "host-local"}}`, Check: func(t *testing.T, c *config) {
			if c.mode != netlink.IPVLAN_MODE_L2 || c.modeStr != "l2" || c.Master != "" || c.MTU != 0 || c.LinkInContainer || !c.layer3 {
				t.Errorf("defaults: %+v", c)
			}
		}},
		{Name: "every key", Stdin: `{"name": "n", "master": "eth1", "mode": "l3s", "mtu": 1400, "linkInContainer": true, "dns": {"nameservers": ["10.0.0.1"]}}`, Check: func(t *testing.T, c *config) {
			if c.mode != netlink.IPVLAN_MODE_L3S || c.Master != "eth1" || c.MTU != 1400 || !c.LinkInContainer || c.layer3 || len(c.DNS.Nameservers) != 1 {
				t.Errorf("got %+v", c)
			}
		}},
		{Name: "l3", Stdin: `{"name": "n", "mode": "l3", "ipam": {}}`, Check: func(t *testing.T, c *config) {
			if c.mode != netlink.IPVLAN_MODE_L3 || c.layer3 {
				t.Errorf("got %+v", c)
			}
		}},
		{Name: "malformed", Stdin: `{"name": `, Code: 6, ErrHas: "parse config"},
		{Name: "wrong type", Stdin: `{"name": "n", "mtu": "x"}`, Code: 7, ErrHas: `mtu: "x" is not a whole number`},
		{Name: "no name", Stdin: `{}`, Code: 7, ErrHas: "name: missing"},
		{Name: "bad mode", Stdin: `{"name": "n", "mode": "bridge"}`, Code: 7, ErrHas: `mode: "bridge"`},
		{Name: "bad master", Stdin: `{"name": "n", "master": "a b"}`, Code: 7, ErrHas: `master: "a b"`},
		{Name: "bad mtu", Stdin: `{"name": "n", "mtu": 70000}`, Code: 7, ErrHas: "mtu: 70000"},
		// Upstream's isLayer3 := IPAM.Type != "": layer 2 only.
		{Name: "ipam without type", Stdin: `{"name": "n", "ipam": {"subnet": "10.0.0.0/8"}}`, Check: func(t *testing.T, c *config) {
			if c.layer3 {
				t.Error("layer3, want layer 2 only")
			}
		}},
	}
	testutil.RunConfigCases(t, func(b []byte, _ string) (*config, error) { return parseConfig(b) }, tests)
}
