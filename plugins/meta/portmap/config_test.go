package portmap

import (
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/result"
)

func TestParseConfig(t *testing.T) {
	base := `"cniVersion":"1.1.0","name":"n","type":"portmap"`
	for _, tc := range []struct {
		name, conf string
		code       uint // 0: valid
		want       string
	}{
		{name: "defaults", conf: `{` + base + `,"runtimeConfig":{"portMappings":[{"hostPort":80,"containerPort":8080}]}}`},
		{name: "no mappings", conf: `{` + base + `}`},
		{name: "udp with hostIP", conf: `{` + base + `,"runtimeConfig":{"portMappings":[{"hostPort":53,"containerPort":53,"protocol":"UDP","hostIP":"10.0.0.1"}]}}`},
		{name: "hostPort 0", conf: `{` + base + `,"runtimeConfig":{"portMappings":[{"hostPort":0,"containerPort":80}]}}`, code: 7, want: "runtimeConfig.portMappings[0].hostPort: 0 out of range 1-65535"},
		{name: "containerPort too big", conf: `{` + base + `,"runtimeConfig":{"portMappings":[{"hostPort":1,"containerPort":65536}]}}`, code: 7, want: "runtimeConfig.portMappings[0].containerPort: 65536 out of range 1-65535"},
		{name: "protocol", conf: `{` + base + `,"runtimeConfig":{"portMappings":[{"hostPort":1,"containerPort":1,"protocol":"icmp"}]}}`, code: 7, want: `runtimeConfig.portMappings[0].protocol: "icmp" (want tcp, udp or sctp)`},
		{name: "hostIP", conf: `{` + base + `,"runtimeConfig":{"portMappings":[{"hostPort":1,"containerPort":1,"hostIP":"nope"}]}}`, code: 7, want: `runtimeConfig.portMappings[0].hostIP: "nope" is not an IP address`},
		{name: "backend", conf: `{` + base + `,"backend":"ebpf"}`, code: 7, want: `backend: "ebpf" (want "iptables" or "nftables")`},
		{name: "markMasqBit range", conf: `{` + base + `,"markMasqBit":32}`, code: 7, want: "markMasqBit: 32 out of range 0-31"},
		{name: "markMasqBit with external chain", conf: `{` + base + `,"markMasqBit":3,"externalSetMarkChain":"X"}`, code: 7, want: "markMasqBit and externalSetMarkChain: set only one (the external chain does its own marking)"},
		// Upstream's nftables backend ignores markMasqBit (ADD logs it here).
		{name: "markMasqBit on nftables", conf: `{` + base + `,"backend":"nftables","markMasqBit":3}`},
		// Upstream's detectBackendOfConditions: a leading "!" is iptables'.
		{name: "negated iptables conditions", conf: `{` + base + `,"backend":"iptables","conditionsV4":["!","-d","1.2.3.4"]}`},
		{name: "nft conditions", conf: `{` + base + `,"conditionsV4":["ip saddr 1.2.3.4"]}`, code: 7, want: "conditionsV4/conditionsV6: not supported with the nftables backend (rules are made over netlink, not by nft)"},
		{name: "iptables conditions", conf: `{` + base + `,"conditionsV4":["-s","1.2.3.4"]}`},
		{name: "nft conditions on iptables", conf: `{` + base + `,"backend":"iptables","conditionsV4":["ip saddr 1.2.3.4"]}`, code: 7, want: `conditionsV4/conditionsV6: nft syntax (not starting with "-" or "!"), but backend is "iptables"`},
		{name: "empty condition", conf: `{` + base + `,"conditionsV4":["-s",""]}`, code: 7, want: "conditionsV4[1]: empty"},
		// A line break would end the iptables-restore line the condition
		// goes into, and start one of the runtime's choosing.
		{name: "condition with a newline", conf: `{` + base + `,"conditionsV4":["-s","10.0.0.0/8\n-I PREROUTING 1 -j ACCEPT"]}`, code: 7,
			want: `conditionsV4: "10.0.0.0/8\n-I PREROUTING 1 -j ACCEPT" holds a line break`},
		{name: "condition with a carriage return", conf: `{` + base + `,"conditionsV6":["-d","fd00::/8\r"]}`, code: 7,
			want: `conditionsV6: "fd00::/8\r" holds a line break`},
		{name: "not JSON", conf: `{`, code: 6},
		{name: "no name", conf: `{"cniVersion":"1.1.0","type":"portmap"}`, code: 7, want: "name: missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseConfig([]byte(tc.conf))
			if tc.code == 0 {
				if err != nil {
					t.Fatalf("parseConfig: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("parseConfig accepted %s", tc.conf)
			}
			if got := result.Code(err); got != tc.code {
				t.Errorf("code %d, want %d (%v)", got, tc.code, err)
			}
			var te *types.Error
			if tc.want != "" && (!asError(err, &te) || te.Msg != tc.want) {
				t.Errorf("error %q, want %q", err, tc.want)
			}
			_ = c
		})
	}
}

func TestOptionsDefaults(t *testing.T) {
	c, err := parseConfig([]byte(`{"cniVersion":"1.1.0","name":"n","type":"portmap","runtimeConfig":{"portMappings":[{"hostPort":53,"containerPort":5353,"protocol":"UDP"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	o := c.options(netfilter.Owner{Network: "n", ContainerID: "c"}, nil)
	if !o.SNAT || o.MasqAll || o.MarkMasqBit != 13 || o.ExternalSetMarkChain != "" {
		t.Errorf("defaults: %+v", o)
	}
	if len(o.Mappings) != 1 || o.Mappings[0].Protocol != "udp" {
		t.Errorf("mappings: %+v", o.Mappings)
	}
	if c.backend != "" {
		t.Errorf("backend %q, want upstream's default", c.backend)
	}
}

func asError(err error, te **types.Error) bool {
	e, ok := err.(*types.Error)
	if ok {
		*te = e
	}
	return ok
}
