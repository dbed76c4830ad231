package macvlan

import (
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/result"
)

func TestParseConfig(t *testing.T) {
	const ipam = `"ipam": {"type": "host-local", "subnet": "10.1.0.0/24"}`
	tests := []struct {
		name    string
		stdin   string
		cniArgs string
		code    uint
		errHas  string
		check   func(*testing.T, *config)
	}{
		{
			name:  "defaults",
			stdin: `{"cniVersion": "1.0.0", "name": "n", "type": "macvlan", ` + ipam + `}`,
			check: func(t *testing.T, c *config) {
				if c.mode != netlink.MACVLAN_MODE_BRIDGE || c.modeStr != "bridge" || c.Master != "" || c.MTU != 0 || c.mac != nil || c.LinkInContainer || c.BCQueueLen != 0 || !c.layer3 {
					t.Errorf("defaults: %+v", c)
				}
			},
		},
		{
			name: "every key",
			stdin: `{"cniVersion": "1.1.0", "name": "n", "type": "macvlan", "master": "eth1", "mode": "passthru", "mtu": 1400,
				"mac": "02:00:00:00:00:09", "linkInContainer": true, "bcqueuelen": 100, "dns": {"nameservers": ["10.1.0.1"]}, ` + ipam + `}`,
			check: func(t *testing.T, c *config) {
				if c.mode != netlink.MACVLAN_MODE_PASSTHRU || c.Master != "eth1" || c.MTU != 1400 || c.mac.String() != "02:00:00:00:00:09" || !c.LinkInContainer || c.BCQueueLen != 100 || len(c.DNS.Nameservers) != 1 {
					t.Errorf("got %+v", c)
				}
			},
		},
		{name: "private", stdin: `{"name": "n", "mode": "private"}`, check: func(t *testing.T, c *config) {
			if c.mode != netlink.MACVLAN_MODE_PRIVATE || c.layer3 {
				t.Errorf("mode %v layer3 %v", c.mode, c.layer3)
			}
		}},
		{name: "vepa", stdin: `{"name": "n", "mode": "vepa", "ipam": {}}`, check: func(t *testing.T, c *config) {
			if c.mode != netlink.MACVLAN_MODE_VEPA || c.layer3 {
				t.Errorf("mode %v layer3 %v", c.mode, c.layer3)
			}
		}},
		{
			name:    "MAC order: runtimeConfig, args, CNI_ARGS, key",
			stdin:   `{"name": "n", "mac": "02:00:00:00:00:04", "args": {"cni": {"mac": "02:00:00:00:00:02"}}, "runtimeConfig": {"mac": "02:00:00:00:00:01"}}`,
			cniArgs: "MAC=02:00:00:00:00:03",
			check: func(t *testing.T, c *config) {
				if c.mac.String() != "02:00:00:00:00:01" {
					t.Errorf("mac %s", c.mac)
				}
			},
		},
		{
			name: "CNI_ARGS MAC beats the key", stdin: `{"name": "n", "mac": "02:00:00:00:00:04"}`, cniArgs: "IgnoreUnknown=1;MAC=02:00:00:00:00:03",
			check: func(t *testing.T, c *config) {
				if c.mac.String() != "02:00:00:00:00:03" {
					t.Errorf("mac %s", c.mac)
				}
			},
		},
		{name: "malformed", stdin: `{"name": "n", `, code: 6, errHas: "parse config"},
		{name: "wrong type", stdin: `{"name": "n", "linkInContainer": "yes"}`, code: 6, errHas: "linkInContainer"},
		{name: "no name", stdin: `{"type": "macvlan"}`, code: 7, errHas: "name: missing"},
		{name: "bad mode", stdin: `{"name": "n", "mode": "l2"}`, code: 7, errHas: `mode: "l2"`},
		{name: "bad master", stdin: `{"name": "n", "master": "a/b"}`, code: 7, errHas: `master: "a/b"`},
		{name: "bad mtu", stdin: `{"name": "n", "mtu": 20}`, code: 7, errHas: "mtu: 20"},
		{name: "bad mac", stdin: `{"name": "n", "mac": "zz"}`, code: 7, errHas: `mac: "zz"`},
		{name: "bad CNI_ARGS", stdin: `{"name": "n"}`, cniArgs: "MAC", code: 4, errHas: "CNI_ARGS"},
		{name: "ipam without type", stdin: `{"name": "n", "ipam": {"subnet": "10.1.0.0/24"}}`, code: 7, errHas: "ipam.type: missing"},
		{name: "ipam type is a path", stdin: `{"name": "n", "ipam": {"type": "../x"}}`, code: 7, errHas: "ipam.type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig([]byte(tt.stdin), tt.cniArgs)
			if tt.code == 0 {
				if err != nil {
					t.Fatalf("parseConfig: %v", err)
				}
				tt.check(t, c)
				return
			}
			if err == nil {
				t.Fatalf("parseConfig accepted %s", tt.stdin)
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
