package macvlan

import (
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/testutil"
)

func TestParseConfig(t *testing.T) {
	const ipam = `"ipam": {"type": "host-local", "subnet": "10.1.0.0/24"}`
	tests := []testutil.ConfigCase[*config]{
		{
			Name:  "defaults",
			Stdin: `{"cniVersion": "1.0.0", "name": "n", "type": "macvlan", ` + ipam + `}`,
			Check: func(t *testing.T, c *config) {
				if c.mode != netlink.MACVLAN_MODE_BRIDGE || c.modeStr != "bridge" || c.Master != "" || c.MTU != 0 || c.mac != nil || c.LinkInContainer || c.BCQueueLen != 0 || !c.layer3 {
					t.Errorf("defaults: %+v", c)
				}
			},
		},
		{
			Name: "every key",
			Stdin: `{"cniVersion": "1.1.0", "name": "n", "type": "macvlan", "master": "eth1", "mode": "passthru", "mtu": 1400,
				"mac": "02:00:00:00:00:09", "linkInContainer": true, "bcqueuelen": 100, "dns": {"nameservers": ["10.1.0.1"]}, ` + ipam + `}`,
			Check: func(t *testing.T, c *config) {
				if c.mode != netlink.MACVLAN_MODE_PASSTHRU || c.Master != "eth1" || c.MTU != 1400 || c.mac.String() != "02:00:00:00:00:09" || !c.LinkInContainer || c.BCQueueLen != 100 || len(c.DNS.Nameservers) != 1 {
					t.Errorf("got %+v", c)
				}
			},
		},
		{Name: "private", Stdin: `{"name": "n", "mode": "private"}`, Check: func(t *testing.T, c *config) {
			if c.mode != netlink.MACVLAN_MODE_PRIVATE || c.layer3 {
				t.Errorf("mode %v layer3 %v", c.mode, c.layer3)
			}
		}},
		{Name: "vepa", Stdin: `{"name": "n", "mode": "vepa", "ipam": {}}`, Check: func(t *testing.T, c *config) {
			if c.mode != netlink.MACVLAN_MODE_VEPA || c.layer3 {
				t.Errorf("mode %v layer3 %v", c.mode, c.layer3)
			}
		}},
		{
			Name:    "MAC order: runtimeConfig, args, CNI_ARGS, key",
			Stdin:   `{"name": "n", "mac": "02:00:00:00:00:04", "args": {"cni": {"mac": "02:00:00:00:00:02"}}, "runtimeConfig": {"mac": "02:00:00:00:00:01"}}`,
			CNIArgs: "MAC=02:00:00:00:00:03",
			Check: func(t *testing.T, c *config) {
				if c.mac.String() != "02:00:00:00:00:01" {
					t.Errorf("mac %s", c.mac)
				}
			},
		},
		{
			Name: "CNI_ARGS MAC beats the key", Stdin: `{"name": "n", "mac": "02:00:00:00:00:04"}`, CNIArgs: "IgnoreUnknown=1;MAC=02:00:00:00:00:03",
			Check: func(t *testing.T, c *config) {
				if c.mac.String() != "02:00:00:00:00:03" {
					t.Errorf("mac %s", c.mac)
				}
			},
		},
		{Name: "malformed", Stdin: `{"name": "n", `, Code: 6, ErrHas: "parse config"},
		{Name: "wrong type", Stdin: `{"name": "n", "linkInContainer": "yes"}`, Code: 7, ErrHas: `linkInContainer: "yes" is not true or false`},
		{Name: "no name", Stdin: `{"type": "macvlan"}`, Code: 7, ErrHas: "name: missing"},
		{Name: "bad mode", Stdin: `{"name": "n", "mode": "l2"}`, Code: 7, ErrHas: `mode: "l2"`},
		{Name: "bad master", Stdin: `{"name": "n", "master": "a/b"}`, Code: 7, ErrHas: `master: "a/b"`},
		{Name: "bad mtu", Stdin: `{"name": "n", "mtu": 20}`, Code: 7, ErrHas: "mtu: 20"},
		{Name: "bad mac", Stdin: `{"name": "n", "mac": "zz"}`, Code: 7, ErrHas: `mac: "zz"`},
		{Name: "bad CNI_ARGS", Stdin: `{"name": "n"}`, CNIArgs: "MAC", Code: 4, ErrHas: "CNI_ARGS"},
		// Upstream's isLayer3 := IPAM.Type != "": layer 2 only.
		{Name: "ipam without type", Stdin: `{"name": "n", "ipam": {"subnet": "10.1.0.0/24"}}`, Check: func(t *testing.T, c *config) {
			if c.layer3 {
				t.Error("layer3, want layer 2 only")
			}
		}},
		{Name: "ipam type is a path", Stdin: `{"name": "n", "ipam": {"type": "../x"}}`, Code: 7, ErrHas: "ipam.type"},
	}
	testutil.RunConfigCases(t, parseConfig, tests)
}
