package tuning

import (
	"strings"
	"testing"

	"github.com/cniforge/plugins/pkg/result"
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
	for _, tc := range []struct {
		name    string
		stdin   string
		envArgs string
		code    uint   // 0: valid
		msg     string // in the error
		check   func(t *testing.T, c *netConf)
	}{
		{name: "defaults", stdin: base + `}`, check: func(t *testing.T, c *netConf) {
			if c.DataDir != DefaultDataDir || c.changesLink() || len(c.sysctls) != 0 {
				t.Errorf("defaults: %+v", c)
			}
		}},
		{name: "mac priority: args.cni over runtimeConfig over CNI_ARGS over mac",
			stdin:   base + `, "mac": "02:00:00:00:00:01", "runtimeConfig": {"mac": "02:00:00:00:00:03"}, "args": {"cni": {"mac": "02:00:00:00:00:04"}}}`,
			envArgs: "IgnoreUnknown=1;MAC=02:00:00:00:00:02",
			check: func(t *testing.T, c *netConf) {
				if c.mac.String() != "02:00:00:00:00:04" {
					t.Errorf("mac %s", c.mac)
				}
			}},
		{name: "CNI_ARGS MAC over mac", stdin: base + `, "mac": "02:00:00:00:00:01"}`, envArgs: "MAC=02:00:00:00:00:02",
			check: func(t *testing.T, c *netConf) {
				if c.mac.String() != "02:00:00:00:00:02" {
					t.Errorf("mac %s", c.mac)
				}
			}},
		{name: "args.cni overrides and merges", stdin: base + `, "mtu": 1400, "sysctl": {"net.core.somaxconn": "100", "net.ipv4.conf.IFNAME.arp_filter": "0"},
			"args": {"cni": {"mtu": 1300, "promisc": true, "allmulti": false, "txQLen": 7, "sysctl": {"net.ipv4.conf.IFNAME.arp_filter": "1"}}}}`,
			check: func(t *testing.T, c *netConf) {
				if c.Mtu != 1300 || !c.Promisc || c.Allmulti == nil || *c.Allmulti || *c.TxQLen != 7 {
					t.Errorf("args: %+v", c)
				}
				if len(c.sysctls) != 2 || c.sysctls[0].Path != "net/core/somaxconn" || c.sysctls[1].Path != "net/ipv4/conf/eth0/arp_filter" || c.sysctls[1].Value != "1" {
					t.Errorf("sysctls: %+v", c.sysctls)
				}
			}},
		{name: "not JSON", stdin: `{`, code: 6},
		{name: "no name", stdin: `{"cniVersion": "1.0.0", "type": "tuning"}`, code: 7, msg: "name"},
		{name: "bad mac", stdin: base + `, "mac": "zz"}`, code: 7, msg: `mac: "zz"`},
		{name: "bad runtime mac", stdin: base + `, "runtimeConfig": {"mac": "02:00"}}`, code: 7, msg: "mac"},
		{name: "bad CNI_ARGS", stdin: base + `}`, envArgs: "NOPE=1", code: 7, msg: "CNI_ARGS"},
		{name: "mtu too small", stdin: base + `, "mtu": 10}`, code: 7, msg: "mtu: 10"},
		{name: "negative mtu", stdin: base + `, "mtu": -1}`, code: 7, msg: "mtu: -1"},
		{name: "negative txQLen", stdin: base + `, "txQLen": -1}`, code: 7, msg: "txQLen: -1"},
		{name: "txQLen above 32 bits", stdin: base + `, "txQLen": 4294967296}`, code: 7, msg: "txQLen: 4294967296 out of range"},
		{name: "relative dataDir", stdin: base + `, "dataDir": "../x"}`, code: 7, msg: `dataDir: "../x" is not an absolute path`},
		{name: "sysctl outside net", stdin: base + `, "sysctl": {"kernel.hostname": "x"}}`, code: 7, msg: `"kernel.hostname"`},
		{name: "sysctl traversal", stdin: base + `, "sysctl": {"net/../../../etc/passwd": "x"}}`, code: 7, msg: "/proc/sys/net/"},
		{name: "sysctl traversal in args", stdin: base + `, "args": {"cni": {"sysctl": {"net.ipv4/../../kernel.x": "1"}}}}`, code: 7},
		{name: "sysctl value with newline", stdin: base + `, "sysctl": {"net.core.somaxconn": "1\n2"}}`, code: 7, msg: "newline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseConfig([]byte(tc.stdin), tc.envArgs, "eth0")
			if tc.code == 0 {
				if err != nil {
					t.Fatalf("parseConfig: %v", err)
				}
				tc.check(t, c)
				return
			}
			if err == nil {
				t.Fatalf("parseConfig succeeded, want code %d", tc.code)
			}
			if got := result.Code(err); got != tc.code {
				t.Errorf("code %d, want %d (%v)", got, tc.code, err)
			}
			if tc.msg != "" && !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not name %q", err, tc.msg)
			}
		})
	}
}
