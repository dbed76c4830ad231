package ptp

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cniforge/plugins/pkg/result"
	"github.com/cniforge/plugins/pkg/testutil"
)

func TestParseConfig(t *testing.T) {
	const ipam = `"ipam": {"type": "host-local", "subnet": "10.1.0.0/24"}`
	tests := []testutil.ConfigCase[*netConf]{
		{
			Name:  "defaults",
			Stdin: `{"cniVersion": "1.0.0", "name": "n", "type": "ptp", ` + ipam + `}`,
			Check: func(t *testing.T, c *netConf) {
				if c.IPMasq || c.MTU != 0 || c.Backend() != "" || len(c.RawPrev) != 0 {
					t.Errorf("defaults: ipMasq %v mtu %d backend %q prev %s", c.IPMasq, c.MTU, c.Backend(), c.RawPrev)
				}
				if c.IPAM.Type != "host-local" {
					t.Errorf("ipam.type = %q", c.IPAM.Type)
				}
			},
		},
		{
			Name: "every key",
			Stdin: `{"cniVersion": "1.0.0", "name": "n", "type": "ptp", "ipMasq": true, "ipMasqBackend": "nftables",
				"ipMasqExcludeCIDRs": ["10.88.0.0/16"], "mtu": 1400, "dns": {"nameservers": ["10.1.0.1"]}, ` + ipam + `}`,
			Check: func(t *testing.T, c *netConf) {
				if !c.IPMasq || c.MTU != 1400 || c.Backend() != "nftables" || len(c.DNS.Nameservers) != 1 ||
					fmt.Sprint(c.ExcludedCIDRs()) != "[10.88.0.0/16]" {
					t.Errorf("got ipMasq %v mtu %d backend %q dns %v", c.IPMasq, c.MTU, c.Backend(), c.DNS)
				}
			},
		},
		{
			Name:  "iptables backend",
			Stdin: `{"name": "n", "type": "ptp", "ipMasqBackend": "iptables", ` + ipam + `}`,
			Check: func(t *testing.T, c *netConf) {
				if c.Backend() != "iptables" {
					t.Errorf("backend %q", c.Backend())
				}
			},
		},
		{
			Name: "prevResult",
			Stdin: `{"cniVersion": "1.0.0", "name": "n", "type": "ptp", ` + ipam + `,
				"prevResult": {"cniVersion": "1.0.0", "interfaces": [{"name": "eth0", "sandbox": "/x"}],
				"ips": [{"address": "10.1.0.2/24", "gateway": "10.1.0.1", "interface": 0}]}}`,
			Check: func(t *testing.T, c *netConf) {
				prev, err := c.Prev()
				if err != nil || prev == nil || len(prev.IPs) != 1 || prev.IPs[0].Address.String() != "10.1.0.2/24" {
					t.Errorf("prevResult %+v: %v", prev, err)
				}
			},
		},
		{Name: "malformed", Stdin: `{"name": "n", `, Code: 6, ErrHas: "parse config"},
		{Name: "wrong type for mtu", Stdin: `{"name": "n", "mtu": "big", ` + ipam + `}`, Code: 7, ErrHas: `mtu: "big" is not a whole number`},
		{Name: "no name", Stdin: `{"type": "ptp", ` + ipam + `}`, Code: 7, ErrHas: "name: missing"},
		{Name: "no ipam", Stdin: `{"name": "n", "type": "ptp"}`, Code: 7, ErrHas: "ipam: missing"},
		{Name: "null ipam", Stdin: `{"name": "n", "type": "ptp", "ipam": null}`, Code: 7, ErrHas: "ipam: missing"},
		{Name: "ipam without type", Stdin: `{"name": "n", "ipam": {"subnet": "10.1.0.0/24"}}`, Code: 7, ErrHas: "ipam.type: missing"},
		{Name: "ipam type is a path", Stdin: `{"name": "n", "ipam": {"type": "../host-local"}}`, Code: 7, ErrHas: "ipam.type"},
		{Name: "negative mtu", Stdin: `{"name": "n", "mtu": -1, ` + ipam + `}`, Code: 7, ErrHas: "mtu: -1"},
		{Name: "tiny mtu", Stdin: `{"name": "n", "mtu": 20, ` + ipam + `}`, Code: 7, ErrHas: "mtu: 20"},
		{Name: "huge mtu", Stdin: `{"name": "n", "mtu": 70000, ` + ipam + `}`, Code: 7, ErrHas: "mtu: 70000"},
		{Name: "unknown backend", Stdin: `{"name": "n", "ipMasqBackend": "pf", ` + ipam + `}`, Code: 7, ErrHas: `ipMasqBackend: "pf"`},
		{Name: "exclusion not a CIDR", Stdin: `{"name": "n", "ipMasqExcludeCIDRs": ["fd00::1"], ` + ipam + `}`, Code: 7, ErrHas: `ipMasqExcludeCIDRs[0]: "fd00::1" is not a CIDR`},
		{Name: "exclusion of everything", Stdin: `{"name": "n", "ipMasqExcludeCIDRs": ["::/0"], ` + ipam + `}`, Code: 7, ErrHas: `ipMasqExcludeCIDRs[0]: "::/0" excludes every destination`},
		{Name: "empty backend", Stdin: `{"name": "n", "ipMasqBackend": "", ` + ipam + `}`, Code: 7, ErrHas: `ipMasqBackend: ""`},
		{
			// Parsed only where a verb needs it (CHECK): DEL must run.
			Name:  "bad prevResult is left unparsed",
			Stdin: `{"cniVersion": "1.0.0", "name": "n", ` + ipam + `, "prevResult": {"cniVersion": "1.0.0", "ips": [{"address": "nope"}]}}`,
			Check: func(t *testing.T, c *netConf) {
				if _, err := c.Prev(); err == nil || result.Code(err) != 6 || !strings.Contains(err.Error(), "prevResult") {
					t.Errorf("Prev: %v, want code 6 naming prevResult", err)
				}
			},
		},
	}
	testutil.RunConfigCases(t, func(b []byte, _ string) (*netConf, error) { return parseConfig(b) }, tests)
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
