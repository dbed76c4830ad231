package tuning

import (
	"testing"

	"github.com/cniforge/plugins/pkg/testutil"
)

func TestSysctlPath(t *testing.T) {
	for _, tc := range []struct {
		key, ifName, want string
		bad               bool
	}{
		{key: "net.ipv4.conf.eth0.arp_filter", want: "net/ipv4/conf/eth0/arp_filter"},
		{key: "net.ipv4.conf.IFNAME.arp_filter", ifName: "net1", want: "net/ipv4/conf/net1/arp_filter"},
		{key: "net.ipv4.conf.IFNAME.arp_filter", ifName: "eth0.100", want: "net/ipv4/conf/eth0.100/arp_filter"},
		{key: "net/ipv4/conf/eth0.100/arp_filter", want: "net/ipv4/conf/eth0.100/arp_filter"},
		{key: "net.ipv4.conf.eth0/100.arp_filter", want: "net/ipv4/conf/eth0.100/arp_filter"},
		{key: "net/ipv6/conf/IFNAME/disable_ipv6", ifName: "eth0", want: "net/ipv6/conf/eth0/disable_ipv6"},
		{key: "net.core.somaxconn", want: "net/core/somaxconn"},
		{key: "net.ipv4.conf.IFNAME.arp_filter", want: "net/ipv4/conf/IFNAME/arp_filter"}, // GC, STATUS
		{key: "kernel.hostname", bad: true},
		{key: "net/../kernel/hostname", bad: true},
		{key: "net.ipv4.conf.IFNAME.x", ifName: "..", bad: true},
		{key: "net..ipv4", bad: true},
		{key: "/net/ipv4/ip_forward", bad: true},
		{key: "net", bad: true},
		{key: "net/", bad: true},
		{key: "", bad: true},
	} {
		got, err := sysctlPath(tc.key, tc.ifName)
		if tc.bad {
			if err == nil {
				t.Errorf("sysctlPath(%q, %q) = %q, want an error", tc.key, tc.ifName, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("sysctlPath(%q, %q) = %q, %v; want %q", tc.key, tc.ifName, got, err, tc.want)
		}
	}
}

func TestParseConfig(t *testing.T) {
	const base = `{"cniVersion": "1.0.0", "name": "n", "type": "tuning"`
	testutil.RunConfigCases(t, func(stdin []byte, cniArgs string) (*netConf, error) {
		return parseConfig(stdin, cniArgs, "eth0")
	}, []testutil.ConfigCase[*netConf]{
		{Name: "defaults", Stdin: base + `}`, Check: func(t *testing.T, c *netConf) {
			if c.DataDir != DefaultDataDir || c.changesLink() || len(c.sysctls) != 0 {
				t.Errorf("defaults: %+v", c)
			}
		}},
		{Name: "mac priority: args.cni over runtimeConfig over CNI_ARGS over mac",
			Stdin:   base + `, "mac": "02:00:00:00:00:01", "runtimeConfig": {"mac": "02:00:00:00:00:03"}, "args": {"cni": {"mac": "02:00:00:00:00:04"}}}`,
			CNIArgs: "IgnoreUnknown=1;MAC=02:00:00:00:00:02",
			Check: func(t *testing.T, c *netConf) {
				if c.mac.String() != "02:00:00:00:00:04" {
					t.Errorf("mac %s", c.mac)
				}
			}},
		{Name: "CNI_ARGS MAC over mac", Stdin: base + `, "mac": "02:00:00:00:00:01"}`, CNIArgs: "MAC=02:00:00:00:00:02",
			Check: func(t *testing.T, c *netConf) {
				if c.mac.String() != "02:00:00:00:00:02" {
					t.Errorf("mac %s", c.mac)
				}
			}},
		{Name: "args.cni overrides and merges", Stdin: base + `, "mtu": 1400, "sysctl": {"net.core.somaxconn": "100", "net.ipv4.conf.IFNAME.arp_filter": "0"},
			"args": {"cni": {"mtu": 1300, "promisc": true, "allmulti": false, "txQLen": 7, "sysctl": {"net.ipv4.conf.IFNAME.arp_filter": "1"}}}}`,
			Check: func(t *testing.T, c *netConf) {
				if c.Mtu != 1300 || !c.Promisc || c.Allmulti == nil || *c.Allmulti || *c.TxQLen != 7 {
					t.Errorf("args: %+v", c)
				}
				if len(c.sysctls) != 2 || c.sysctls[0].Path != "net/core/somaxconn" || c.sysctls[1].Path != "net/ipv4/conf/eth0/arp_filter" || c.sysctls[1].Value != "1" {
					t.Errorf("sysctls: %+v", c.sysctls)
				}
			}},
		{Name: "not JSON", Stdin: `{`, Code: 6},
		{Name: "no name", Stdin: `{"cniVersion": "1.0.0", "type": "tuning"}`, Code: 7, ErrHas: "name"},
		{Name: "bad mac", Stdin: base + `, "mac": "zz"}`, Code: 7, ErrHas: `mac: "zz"`},
		{Name: "bad runtime mac", Stdin: base + `, "runtimeConfig": {"mac": "02:00"}}`, Code: 7, ErrHas: "mac"},
		{Name: "bad CNI_ARGS", Stdin: base + `}`, CNIArgs: "NOPE=1", Code: 7, ErrHas: "CNI_ARGS"},
		{Name: "mtu too small", Stdin: base + `, "mtu": 10}`, Code: 7, ErrHas: "mtu: 10"},
		{Name: "negative mtu", Stdin: base + `, "mtu": -1}`, Code: 7, ErrHas: "mtu: -1"},
		{Name: "negative txQLen", Stdin: base + `, "txQLen": -1}`, Code: 7, ErrHas: "txQLen: -1"},
		{Name: "txQLen above 32 bits", Stdin: base + `, "txQLen": 4294967296}`, Code: 7, ErrHas: "txQLen: 4294967296 out of range"},
		{Name: "relative dataDir", Stdin: base + `, "dataDir": "../x"}`, Code: 7, ErrHas: `dataDir: "../x" is not an absolute path`},
		{Name: "sysctl outside net", Stdin: base + `, "sysctl": {"kernel.hostname": "x"}}`, Code: 7, ErrHas: `"kernel.hostname"`},
		{Name: "sysctl traversal", Stdin: base + `, "sysctl": {"net/../../../etc/passwd": "x"}}`, Code: 7, ErrHas: "/proc/sys/net/"},
		{Name: "sysctl traversal in args", Stdin: base + `, "args": {"cni": {"sysctl": {"net.ipv4/../../kernel.x": "1"}}}}`, Code: 7},
		{Name: "sysctl value with newline", Stdin: base + `, "sysctl": {"net.core.somaxconn": "1\n2"}}`, Code: 7, ErrHas: "newline"},
	})
}
