package ptp

import (
	"strings"
	"testing"

	"github.com/cniforge/plugins/pkg/result"
)

func TestParseConfig(t *testing.T) {
	const ipam = `"ipam": {"type": "host-local", "subnet": "10.1.0.0/24"}`
	tests := []struct {
		name   string
		stdin  string
		code   uint   // 0: valid
		errHas string // substring of the error
		check  func(*testing.T, *netConf)
	}{
		{
			name:  "defaults",
			stdin: `{"cniVersion": "1.0.0", "name": "n", "type": "ptp", ` + ipam + `}`,
			check: func(t *testing.T, c *netConf) {
				if c.IPMasq || c.MTU != 0 || c.Backend() != "" || len(c.RawPrev) != 0 {
					t.Errorf("defaults: ipMasq %v mtu %d backend %q prev %s", c.IPMasq, c.MTU, c.Backend(), c.RawPrev)
				}
				if c.IPAM.Type != "host-local" {
					t.Errorf("ipam.type = %q", c.IPAM.Type)
				}
			},
		},
		{
			name: "every key",
			stdin: `{"cniVersion": "1.0.0", "name": "n", "type": "ptp", "ipMasq": true, "ipMasqBackend": "nftables",
				"mtu": 1400, "dns": {"nameservers": ["10.1.0.1"]}, ` + ipam + `}`,
			check: func(t *testing.T, c *netConf) {
				if !c.IPMasq || c.MTU != 1400 || c.Backend() != "nftables" || len(c.DNS.Nameservers) != 1 {
					t.Errorf("got ipMasq %v mtu %d backend %q dns %v", c.IPMasq, c.MTU, c.Backend(), c.DNS)
				}
			},
		},
		{
			name:  "iptables backend",
			stdin: `{"name": "n", "type": "ptp", "ipMasqBackend": "iptables", ` + ipam + `}`,
			check: func(t *testing.T, c *netConf) {
				if c.Backend() != "iptables" {
					t.Errorf("backend %q", c.Backend())
				}
			},
		},
		{
			name: "prevResult",
			stdin: `{"cniVersion": "1.0.0", "name": "n", "type": "ptp", ` + ipam + `,
				"prevResult": {"cniVersion": "1.0.0", "interfaces": [{"name": "eth0", "sandbox": "/x"}],
				"ips": [{"address": "10.1.0.2/24", "gateway": "10.1.0.1", "interface": 0}]}}`,
			check: func(t *testing.T, c *netConf) {
				prev, err := c.Prev()
				if err != nil || prev == nil || len(prev.IPs) != 1 || prev.IPs[0].Address.String() != "10.1.0.2/24" {
					t.Errorf("prevResult %+v: %v", prev, err)
				}
			},
		},
		{name: "malformed", stdin: `{"name": "n", `, code: 6, errHas: "parse config"},
		{name: "wrong type for mtu", stdin: `{"name": "n", "mtu": "big", ` + ipam + `}`, code: 6, errHas: "mtu"},
		{name: "no name", stdin: `{"type": "ptp", ` + ipam + `}`, code: 7, errHas: "name: missing"},
		{name: "no ipam", stdin: `{"name": "n", "type": "ptp"}`, code: 7, errHas: "ipam: missing"},
		{name: "null ipam", stdin: `{"name": "n", "type": "ptp", "ipam": null}`, code: 7, errHas: "ipam: missing"},
		{name: "ipam without type", stdin: `{"name": "n", "ipam": {"subnet": "10.1.0.0/24"}}`, code: 7, errHas: "ipam.type: missing"},
		{name: "ipam type is a path", stdin: `{"name": "n", "ipam": {"type": "../host-local"}}`, code: 7, errHas: "ipam.type"},
		{name: "negative mtu", stdin: `{"name": "n", "mtu": -1, ` + ipam + `}`, code: 7, errHas: "mtu: -1"},
		{name: "tiny mtu", stdin: `{"name": "n", "mtu": 20, ` + ipam + `}`, code: 7, errHas: "mtu: 20"},
		{name: "huge mtu", stdin: `{"name": "n", "mtu": 70000, ` + ipam + `}`, code: 7, errHas: "mtu: 70000"},
		{name: "unknown backend", stdin: `{"name": "n", "ipMasqBackend": "pf", ` + ipam + `}`, code: 7, errHas: `ipMasqBackend: "pf"`},
		{name: "empty backend", stdin: `{"name": "n", "ipMasqBackend": "", ` + ipam + `}`, code: 7, errHas: `ipMasqBackend: ""`},
		{
			// Parsed only where a verb needs it (CHECK): DEL must run.
			name:  "bad prevResult is left unparsed",
			stdin: `{"cniVersion": "1.0.0", "name": "n", ` + ipam + `, "prevResult": {"cniVersion": "1.0.0", "ips": [{"address": "nope"}]}}`,
			check: func(t *testing.T, c *netConf) {
				if _, err := c.Prev(); err == nil || result.Code(err) != 6 || !strings.Contains(err.Error(), "prevResult") {
					t.Errorf("Prev: %v, want code 6 naming prevResult", err)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig([]byte(tt.stdin))
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

func TestHostVethName(t *testing.T) {
	a := hostVethName("net", "c1", "eth0")
	if len(a) > 15 || !strings.HasPrefix(a, "veth") {
		t.Fatalf("%q is not a usable interface name", a)
	}
	if a != hostVethName("net", "c1", "eth0") {
		t.Error("not deterministic")
	}
	for _, other := range []string{hostVethName("net", "c1", "eth1"), hostVethName("net", "c2", "eth0"), hostVethName("net2", "c1", "eth0")} {
		if other == a {
			t.Errorf("attachments share host name %q", a)
		}
	}
}
