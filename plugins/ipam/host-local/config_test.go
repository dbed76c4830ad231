package hostlocal

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/cniforge/plugins/pkg/result"
)

func TestParseConfigDefaults(t *testing.T) {
	tests := []struct {
		name  string
		conf  string
		sets  []string // RangeSet.String() of each set, in order
		gws   []string // gateway of each set's first range
		nets  []string // subnet of each set's first range
		extra func(t *testing.T, c *Config)
	}{{
		name: "legacy top-level subnet, defaults",
		conf: `{"name":"n","ipam":{"type":"host-local","subnet":"10.1.0.0/24"}}`,
		sets: []string{"10.1.0.1-10.1.0.254"},
		gws:  []string{"10.1.0.1"},
		nets: []string{"10.1.0.0/24"},
		extra: func(t *testing.T, c *Config) {
			if c.DataDir != "/var/lib/cni/networks" {
				t.Errorf("dataDir = %q, want the upstream default", c.DataDir)
			}
			if c.RangeSets[0].Key != "ipam.subnet" {
				t.Errorf("key = %q", c.RangeSets[0].Key)
			}
		},
	}, {
		name: "IPv6 range runs to the last address",
		conf: `{"name":"n","ipam":{"ranges":[[{"subnet":"fd00:1::/120"}]]}}`,
		sets: []string{"fd00:1::1-fd00:1::ff"},
		gws:  []string{"fd00:1::1"},
		nets: []string{"fd00:1::/120"},
	}, {
		name: "explicit range and gateway",
		conf: `{"name":"n","ipam":{"dataDir":"/x","ranges":[[{"subnet":"10.1.0.0/16","rangeStart":"10.1.2.10","rangeEnd":"10.1.2.20","gateway":"10.1.255.254"}]]}}`,
		sets: []string{"10.1.2.10-10.1.2.20"},
		gws:  []string{"10.1.255.254"},
		nets: []string{"10.1.0.0/16"},
	}, {
		name: "IPv4-mapped subnet is read as IPv4",
		conf: `{"name":"n","ipam":{"ranges":[[{"subnet":"::ffff:10.9.0.0/120"}]]}}`,
		sets: []string{"10.9.0.1-10.9.0.254"},
		gws:  []string{"10.9.0.1"},
		nets: []string{"10.9.0.0/24"},
	}, {
		name: "runtime ipRanges first, then legacy, then ranges (upstream's order)",
		conf: `{"name":"n","runtimeConfig":{"ipRanges":[[{"subnet":"10.3.0.0/24"}]]},
			"ipam":{"subnet":"10.2.0.0/24","ranges":[[{"subnet":"10.1.0.0/24"},{"subnet":"10.1.1.0/24"}],[{"subnet":"fd00::/64"}]]}}`,
		sets: []string{"10.3.0.1-10.3.0.254", "10.2.0.1-10.2.0.254", "10.1.0.1-10.1.0.254,10.1.1.1-10.1.1.254", "fd00::1-fd00::ffff:ffff:ffff:ffff"},
		gws:  []string{"10.3.0.1", "10.2.0.1", "10.1.0.1", "fd00::1"},
		nets: []string{"10.3.0.0/24", "10.2.0.0/24", "10.1.0.0/24", "fd00::/64"},
	}, {
		name: "a stray legacy gateway beside ranges is ignored, as upstream ignores it",
		conf: `{"name":"n","ipam":{"gateway":"10.9.0.1","ranges":[[{"subnet":"10.1.0.0/24"}]]}}`,
		sets: []string{"10.1.0.1-10.1.0.254"},
		gws:  []string{"10.1.0.1"},
		nets: []string{"10.1.0.0/24"},
	}, {
		name: "routes and resolvConf",
		conf: `{"name":"n","ipam":{"subnet":"10.1.0.0/24","resolvConf":"/etc/x","routes":[{"dst":"0.0.0.0/0"},{"dst":"10.9.0.0/16","gw":"10.1.0.9"}]}}`,
		sets: []string{"10.1.0.1-10.1.0.254"},
		gws:  []string{"10.1.0.1"},
		nets: []string{"10.1.0.0/24"},
		extra: func(t *testing.T, c *Config) {
			if c.ResolvConf != "/etc/x" {
				t.Errorf("resolvConf = %q", c.ResolvConf)
			}
			if len(c.Routes) != 2 || c.Routes[0].GW != nil || c.Routes[0].Dst.String() != "0.0.0.0/0" ||
				c.Routes[1].GW.String() != "10.1.0.9" || c.Routes[1].Dst.String() != "10.9.0.0/16" {
				t.Errorf("routes = %v", c.Routes)
			}
		},
	}, {
		// Upstream's Canonicalize asks nothing of the gateway but to be an
		// address, and takes a range from the network address to the
		// broadcast address: neither is ever handed out here.
		name: "gateway outside the subnet, range from network to broadcast",
		conf: `{"name":"n","ipam":{"subnet":"10.1.0.0/24","gateway":"10.9.0.1","rangeStart":"10.1.0.0","rangeEnd":"10.1.0.255"}}`,
		sets: []string{"10.1.0.1-10.1.0.254"},
		gws:  []string{"10.9.0.1"},
		nets: []string{"10.1.0.0/24"},
	}, {
		name: "gateway at the network address",
		conf: `{"name":"n","ipam":{"subnet":"10.1.0.0/24","gateway":"10.1.0.0"}}`,
		sets: []string{"10.1.0.1-10.1.0.254"},
		gws:  []string{"10.1.0.0"},
		nets: []string{"10.1.0.0/24"},
	}, {
		// Upstream keeps each route whole (types.Route): a 1.1.0 result
		// carries mtu, advmss, priority, table and scope as written.
		name: "route attributes",
		conf: `{"name":"n","ipam":{"subnet":"10.1.0.0/24","routes":[{"dst":"0.0.0.0/0","mtu":1400,"advmss":1360,"priority":100,"table":200,"scope":0}]}}`,
		sets: []string{"10.1.0.1-10.1.0.254"},
		gws:  []string{"10.1.0.1"},
		nets: []string{"10.1.0.0/24"},
		extra: func(t *testing.T, c *Config) {
			r := c.Routes[0]
			if r.MTU != 1400 || r.AdvMSS != 1360 || r.Priority != 100 || r.Table == nil || *r.Table != 200 || r.Scope == nil || *r.Scope != 0 {
				t.Errorf("route = %v", r)
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig([]byte(tt.conf))
			if err != nil {
				t.Fatalf("parseConfig: %v", err)
			}
			if len(c.RangeSets) != len(tt.sets) {
				t.Fatalf("got %d range sets, want %d", len(c.RangeSets), len(tt.sets))
			}
			for i, s := range c.RangeSets {
				if s.String() != tt.sets[i] {
					t.Errorf("set %d = %s, want %s", i, s, tt.sets[i])
				}
				if got := s.Ranges[0].Gateway.String(); got != tt.gws[i] {
					t.Errorf("set %d gateway = %s, want %s", i, got, tt.gws[i])
				}
				if got := s.Ranges[0].Subnet.String(); got != tt.nets[i] {
					t.Errorf("set %d subnet = %s, want %s", i, got, tt.nets[i])
				}
			}
			if tt.extra != nil {
				tt.extra(t, c)
			}
		})
	}
}

func TestParseConfigRequested(t *testing.T) {
	const ipam = `"ipam":{"ranges":[[{"subnet":"10.1.0.0/24"}],[{"subnet":"fd00::/64"}]]}`
	tests := []struct {
		name    string
		conf    string
		cniArgs string
		want    map[int]string
	}{
		{"none", `{"name":"n",` + ipam + `}`, "", map[int]string{}},
		{"CNI_ARGS, comma-separated, other keys ignored", `{"name":"n",` + ipam + `}`,
			"IgnoreUnknown=1;K8S_POD_NAME=p;IP=10.1.0.7,fd00::7", map[int]string{0: "10.1.0.7", 1: "fd00::7"}},
		{"args.cni.ips beats CNI_ARGS", `{"name":"n",` + ipam + `,"args":{"cni":{"ips":["10.1.0.8/24"]}}}`,
			"IP=10.1.0.7", map[int]string{0: "10.1.0.8"}},
		{"runtimeConfig.ips beats args and CNI_ARGS", `{"name":"n",` + ipam + `,"runtimeConfig":{"ips":["fd00::9/64"]},"args":{"cni":{"ips":["10.1.0.8"]}}}`,
			"IP=10.1.0.7", map[int]string{1: "fd00::9"}},
		{"empty runtimeConfig.ips falls through", `{"name":"n",` + ipam + `,"runtimeConfig":{"ips":[]},"args":{"cni":{"ips":["10.1.0.8"]}}}`,
			"", map[int]string{0: "10.1.0.8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseAddConfig([]byte(tt.conf), tt.cniArgs)
			if err != nil {
				t.Fatalf("parseConfig: %v", err)
			}
			if len(c.Requested) != len(tt.want) {
				t.Fatalf("requested = %v, want %v", c.Requested, tt.want)
			}
			for set, ip := range tt.want {
				if c.Requested[set] != netip.MustParseAddr(ip) {
					t.Errorf("requested[%d] = %s, want %s", set, c.Requested[set], ip)
				}
			}
		})
	}
}

func TestParseConfigInvalid(t *testing.T) {
	tests := []struct {
		name    string
		conf    string
		cniArgs string
		code    uint
		msg     string // substring of the error
	}{
		{"malformed JSON", `{"name":`, "", types.ErrDecodingFailure, "parse config"},
		{"wrong type", `{"name":"n","ipam":{"subnet":5}}`, "", types.ErrInvalidNetworkConfig, "ipam.subnet: 5 is not a string"},
		{"no ipam", `{"name":"n"}`, "", 7, "ipam: missing"},
		{"no name", `{"ipam":{"subnet":"10.1.0.0/24"}}`, "", 7, "name: missing"},
		{"name with slash", `{"name":"a/b","ipam":{"subnet":"10.1.0.0/24"}}`, "", 7, `name: "a/b"`},
		{"name dotdot", `{"name":"..","ipam":{"subnet":"10.1.0.0/24"}}`, "", 7, `name: ".."`},
		{"name longer than a folder name", `{"name":"` + strings.Repeat("n", 256) + `","ipam":{"subnet":"10.1.0.0/24"}}`, "", 7, "name: 256 bytes"},
		{"relative dataDir", `{"name":"n","ipam":{"dataDir":"../x","subnet":"10.1.0.0/24"}}`, "", 7, `ipam.dataDir: "../x" is not an absolute path`},
		{"no range", `{"name":"n","ipam":{"ranges":[]}}`, "", 7, "ipam.ranges: no range"},
		{"empty range set", `{"name":"n","ipam":{"ranges":[[]]}}`, "", 7, "ipam.ranges[0]: empty range set"},
		{"bad subnet", `{"name":"n","ipam":{"subnet":"10.1.0.0/33"}}`, "", 7, `ipam.subnet: "10.1.0.0/33" is not a CIDR`},
		{"missing subnet", `{"name":"n","ipam":{"rangeStart":"10.1.0.5"}}`, "", 7, "ipam.subnet: missing"},
		{"host bits", `{"name":"n","ipam":{"subnet":"10.1.0.5/24"}}`, "", 7, "ipam.subnet: 10.1.0.5/24 has host bits set"},
		{"/31", `{"name":"n","ipam":{"subnet":"10.1.0.0/31"}}`, "", 7, "ipam.subnet: 10.1.0.0/31 is too small"},
		{"/32", `{"name":"n","ipam":{"subnet":"10.1.0.1/32"}}`, "", 7, "too small"},
		{"/127", `{"name":"n","ipam":{"ranges":[[{"subnet":"fd00::/127"}]]}}`, "", 7, "ipam.ranges[0][0].subnet: fd00::/127 is too small"},
		{"/128", `{"name":"n","ipam":{"ranges":[[{"subnet":"fd00::1/128"}]]}}`, "", 7, "too small"},
		{"rangeStart outside", `{"name":"n","ipam":{"ranges":[[{"subnet":"10.3.0.0/24"},{"subnet":"10.1.0.0/24","rangeStart":"10.2.0.5"}]]}}`, "", 7,
			"ipam.ranges[0][1].rangeStart: 10.2.0.5 not in subnet 10.1.0.0/24"},
		{"rangeEnd outside", `{"name":"n","ipam":{"subnet":"10.1.0.0/24","rangeEnd":"10.1.1.5"}}`, "", 7, "ipam.rangeEnd: 10.1.1.5 not in subnet 10.1.0.0/24"},
		{"gateway of the other family", `{"name":"n","ipam":{"subnet":"10.1.0.0/24","gateway":"fd00::1"}}`, "", 7, "ipam.gateway: fd00::1 is not of the IP family of subnet 10.1.0.0/24"},
		{"gateway not an IP", `{"name":"n","ipam":{"subnet":"10.1.0.0/24","gateway":"x"}}`, "", 7, `ipam.gateway: "x" is not an IP address`},
		{"rangeStart is the broadcast", `{"name":"n","ipam":{"subnet":"10.1.0.0/24","rangeStart":"10.1.0.255"}}`, "", 7, "ipam.rangeStart: 10.1.0.255 leaves no host address in the range of 10.1.0.0/24"},
		{"rangeEnd is the network", `{"name":"n","ipam":{"subnet":"10.1.0.0/24","rangeEnd":"10.1.0.0"}}`, "", 7, "ipam.rangeEnd: 10.1.0.0 leaves no host address"},
		{"start after end", `{"name":"n","ipam":{"subnet":"10.1.0.0/24","rangeStart":"10.1.0.9","rangeEnd":"10.1.0.5"}}`, "", 7, "ipam.rangeEnd: 10.1.0.5 is before rangeStart 10.1.0.9"},
		{"only the gateway", `{"name":"n","ipam":{"subnet":"10.1.0.0/24","rangeStart":"10.1.0.1","rangeEnd":"10.1.0.1"}}`, "", 7, "holds only the gateway"},
		{"mixed families in a set", `{"name":"n","ipam":{"ranges":[[{"subnet":"10.1.0.0/24"},{"subnet":"fd00::/64"}]]}}`, "", 7, "ipam.ranges[0][1].subnet: fd00::/64 mixes address families"},
		{"overlap within a set", `{"name":"n","ipam":{"ranges":[[{"subnet":"10.1.0.0/24"},{"subnet":"10.1.0.0/25"}]]}}`, "", 7, "ipam.ranges[0][1]: range 10.1.0.1-10.1.0.126 overlaps ipam.ranges[0][0]"},
		{"overlap across sets", `{"name":"n","ipam":{"ranges":[[{"subnet":"10.1.0.0/24"}],[{"subnet":"10.1.0.0/16"}]]}}`, "", 7, "ipam.ranges[1]: range 10.1.0.1-10.1.255.254 overlaps range 10.1.0.1-10.1.0.254 of ipam.ranges[0]"},
		{"legacy overlaps ranges", `{"name":"n","ipam":{"subnet":"10.1.0.0/24","ranges":[[{"subnet":"10.1.0.0/24"}]]}}`, "", 7, "ipam.ranges[0]: range 10.1.0.1-10.1.0.254 overlaps range 10.1.0.1-10.1.0.254 of ipam.subnet"},
		{"runtime ipRanges bad", `{"name":"n","runtimeConfig":{"ipRanges":[[{"subnet":"nope"}]]},"ipam":{}}`, "", 7, `runtimeConfig.ipRanges[0][0].subnet: "nope" is not a CIDR`},
		{"route dst", `{"name":"n","ipam":{"subnet":"10.1.0.0/24","routes":[{"dst":"10.0.0.0"}]}}`, "", 7, `ipam.routes[0].dst: "10.0.0.0" is not a CIDR`},
		{"route gw", `{"name":"n","ipam":{"subnet":"10.1.0.0/24","routes":[{"dst":"10.0.0.0/8","gw":"fd00::1"}]}}`, "", 7, "ipam.routes[0].gw: fd00::1 is not in the family"},
		{"requested outside every set", `{"name":"n","ipam":{"subnet":"10.1.0.0/24"},"runtimeConfig":{"ips":["10.9.0.1"]}}`, "", 7, "runtimeConfig.ips[0]: 10.9.0.1 not in any range set (10.1.0.1-10.1.0.254)"},
		{"requested outside the range but in the subnet", `{"name":"n","ipam":{"subnet":"10.1.0.0/24","rangeStart":"10.1.0.100"},"args":{"cni":{"ips":["10.1.0.50"]}}}`, "", 7, "args.cni.ips[0]: 10.1.0.50 not in any range set"},
		{"requested garbage", `{"name":"n","ipam":{"subnet":"10.1.0.0/24"}}`, "IP=10.1.0.x", 7, `CNI_ARGS IP[0]: "10.1.0.x" is not an IP address`},
		{"two requested in one set", `{"name":"n","ipam":{"subnet":"10.1.0.0/24"}}`, "IP=10.1.0.5,10.1.0.6", 7, "CNI_ARGS IP[1]: 10.1.0.5 and 10.1.0.6 are both in range set"},
		{"requested gateway", `{"name":"n","ipam":{"subnet":"10.1.0.0/24"},"runtimeConfig":{"ips":["10.1.0.1/24"]}}`, "", 7, "runtimeConfig.ips[0]: 10.1.0.1 is the gateway"},
		{"CNI_ARGS not key=value", `{"name":"n","ipam":{"subnet":"10.1.0.0/24"}}`, "garbage", types.ErrInvalidEnvironmentVariables, `CNI_ARGS: "garbage" is not KEY=VALUE`},
		{"0.2.0 with two IPv4 sets", `{"cniVersion":"0.2.0","name":"n","ipam":{"ranges":[[{"subnet":"10.1.0.0/24"}],[{"subnet":"10.2.0.0/24"}]]}}`, "", 7, "cniVersion 0.2.0 results hold one IPv4 and one IPv6 address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseAddConfig([]byte(tt.conf), tt.cniArgs)
			if err == nil {
				t.Fatal("parseConfig succeeded")
			}
			if got := result.Code(err); got != tt.code {
				t.Errorf("code %d, want %d (%v)", got, tt.code, err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not contain %q", err, tt.msg)
			}
		})
	}
}

func TestParseConfigOldVersionsFit(t *testing.T) {
	// One IPv4 and one IPv6 set fit a 0.2.0 result.
	conf := `{"cniVersion":"0.2.0","name":"n","ipam":{"ranges":[[{"subnet":"10.1.0.0/24"}],[{"subnet":"fd00::/64"}]]}}`
	if _, err := parseAddConfig([]byte(conf), ""); err != nil {
		t.Fatal(err)
	}
}

func TestValidateAttachment(t *testing.T) {
	tests := []struct {
		id, ifName string
		ok         bool
	}{
		{"abc-1_2.3", "eth0", true},
		{"", "eth0", false},
		{"..", "eth0", false},
		{"a/b", "eth0", false},
		{"a\r\nb", "eth0", false},
		{"a b", "eth0", false},
		{"abc", "", false},
		{"abc", "e/0", false},
		{"abc", "e 0", false},
	}
	for _, tt := range tests {
		err := validateAttachment(tt.id, tt.ifName)
		if (err == nil) != tt.ok {
			t.Errorf("validateAttachment(%q, %q) = %v, want ok=%v", tt.id, tt.ifName, err, tt.ok)
		}
		if err != nil && result.Code(err) != types.ErrInvalidEnvironmentVariables {
			t.Errorf("validateAttachment(%q, %q) code %d, want 4", tt.id, tt.ifName, result.Code(err))
		}
	}
}

func TestParseResolvConf(t *testing.T) {
	in := "# comment\n; other comment\nnameserver 10.0.0.53\nnameserver fd00::53\ndomain example.com\nsearch a.example b.example\nsearch c.example\noptions ndots:5 rotate\nbogus\n"
	dns, err := parseResolvConf(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := types.DNS{
		Nameservers: []string{"10.0.0.53", "fd00::53"},
		Domain:      "example.com",
		Search:      []string{"a.example", "b.example", "c.example"},
		Options:     []string{"ndots:5", "rotate"},
	}
	if strings.Join(dns.Nameservers, ",") != strings.Join(want.Nameservers, ",") || dns.Domain != want.Domain ||
		strings.Join(dns.Search, ",") != strings.Join(want.Search, ",") || strings.Join(dns.Options, ",") != strings.Join(want.Options, ",") {
		t.Errorf("dns = %+v, want %+v", dns, want)
	}
}

func TestCandidatesRoundRobin(t *testing.T) {
	c, err := parseAddConfig([]byte(`{"name":"n","ipam":{"ranges":[[
		{"subnet":"10.1.0.0/24","rangeStart":"10.1.0.1","rangeEnd":"10.1.0.3"},
		{"subnet":"10.2.0.0/24","rangeStart":"10.2.0.8","rangeEnd":"10.2.0.9","gateway":"10.2.0.9"}]]}}`), "")
	if err != nil {
		t.Fatal(err)
	}
	walk := func(last string) string {
		var l netip.Addr
		if last != "" {
			l = netip.MustParseAddr(last)
		}
		var got []string
		c.RangeSets[0].candidates(l, func(a netip.Addr) bool {
			got = append(got, a.String())
			return true
		})
		return strings.Join(got, " ")
	}
	// gateways 10.1.0.1 and 10.2.0.9 are never candidates
	for last, want := range map[string]string{
		"":          "10.1.0.2 10.1.0.3 10.2.0.8",
		"10.1.0.2":  "10.1.0.3 10.2.0.8 10.1.0.2",
		"10.1.0.3":  "10.2.0.8 10.1.0.2 10.1.0.3",
		"10.2.0.9":  "10.1.0.2 10.1.0.3 10.2.0.8",
		"10.9.9.9":  "10.1.0.2 10.1.0.3 10.2.0.8", // not in the set: start over
		"fd00::1":   "10.1.0.2 10.1.0.3 10.2.0.8",
		"10.2.0.8":  "10.1.0.2 10.1.0.3 10.2.0.8",
		"10.1.0.1":  "10.1.0.2 10.1.0.3 10.2.0.8",
		"10.1.0.10": "10.1.0.2 10.1.0.3 10.2.0.8",
	} {
		if got := walk(last); got != want {
			t.Errorf("after %q: %s, want %s", last, got, want)
		}
	}
}

func TestLastAddr(t *testing.T) {
	for p, want := range map[string]string{
		"10.1.0.0/24":  "10.1.0.255",
		"10.0.0.0/8":   "10.255.255.255",
		"fd00::/64":    "fd00::ffff:ffff:ffff:ffff",
		"fd00::/120":   "fd00::ff",
		"10.1.2.0/30":  "10.1.2.3",
		"10.1.2.64/26": "10.1.2.127",
	} {
		if got := lastAddr(netip.MustParsePrefix(p)).String(); got != want {
			t.Errorf("lastAddr(%s) = %s, want %s", p, got, want)
		}
	}
}
