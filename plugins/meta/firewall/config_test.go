package firewall

import (
	"testing"

	"github.com/cniforge/plugins/pkg/netfilter/forward"
	"github.com/cniforge/plugins/pkg/result"
)

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		name, stdin string
		code        uint // 0: valid
		admin, zone string
		policy      forward.IngressPolicy
		mark        int // checked when the case is valid; 0 means the default
	}{
		{name: "defaults", stdin: `{"name": "n", "type": "firewall"}`, admin: "CNI-ADMIN", zone: "trusted", policy: "open"},
		{name: "podman's empty backend", stdin: `{"name": "n", "backend": ""}`, admin: "CNI-ADMIN", zone: "trusted", policy: "open"},
		{name: "all keys", stdin: `{"name": "n", "backend": "iptables", "iptablesAdminChainName": "MY-ADMIN", "firewalldZone": "public", "ingressPolicy": "isolated"}`,
			admin: "MY-ADMIN", zone: "public", policy: "isolated"},
		{name: "same-bridge", stdin: `{"name": "n", "ingressPolicy": "same-bridge"}`, admin: "CNI-ADMIN", zone: "trusted", policy: "same-bridge"},
		{name: "nftables, mark bit 0", stdin: `{"name": "n", "backend": "nftables", "nftablesMarkBit": 0}`, admin: "CNI-ADMIN", zone: "trusted", policy: "open", mark: -1},
		{name: "mark bit 31", stdin: `{"name": "n", "nftablesMarkBit": 31}`, admin: "CNI-ADMIN", zone: "trusted", policy: "open", mark: 31},
		{name: "mark bit 32", stdin: `{"name": "n", "nftablesMarkBit": 32}`, code: 7},
		{name: "mark bit -1", stdin: `{"name": "n", "nftablesMarkBit": -1}`, code: 7},
		{name: "mark bit a string", stdin: `{"name": "n", "nftablesMarkBit": "12"}`, code: 7},
		{name: "not JSON", stdin: `{"name": `, code: 6},
		{name: "no name", stdin: `{"type": "firewall"}`, code: 7},
		// Upstream's getBackend: an unknown value is absent.
		{name: "unknown backend", stdin: `{"name": "n", "backend": "ebtables"}`, admin: "CNI-ADMIN", zone: "trusted", policy: "open"},
		{name: "unknown policy", stdin: `{"name": "n", "ingressPolicy": "closed"}`, code: 7},
		// 28 bytes is iptables' chain name limit; one more is refused
		// before iptables sees it.
		{name: "admin chain of 28 bytes", stdin: `{"name": "n", "iptablesAdminChainName": "A234567890123456789012345678"}`,
			admin: "A234567890123456789012345678", zone: "trusted", policy: "open"},
		{name: "admin chain of 29 bytes", stdin: `{"name": "n", "iptablesAdminChainName": "A2345678901234567890123456789"}`, code: 7},
		{name: "admin chain too long", stdin: `{"name": "n", "iptablesAdminChainName": "A23456789012345678901234567890"}`, code: 7},
		{name: "admin chain with a blank", stdin: `{"name": "n", "iptablesAdminChainName": "A B"}`, code: 7},
		{name: "admin chain is a target", stdin: `{"name": "n", "iptablesAdminChainName": "DROP"}`, code: 7},
		{name: "admin chain is an option", stdin: `{"name": "n", "iptablesAdminChainName": "-j"}`, code: 7},
	} {
		c, err := parseConfig([]byte(tc.stdin))
		if tc.code != 0 {
			if err == nil || result.Code(err) != tc.code {
				t.Errorf("%s: err = %v (code %d), want code %d", tc.name, err, result.Code(err), tc.code)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if c.AdminChain != tc.admin || c.Zone != tc.zone || c.IngressPolicy != tc.policy {
			t.Errorf("%s: got admin %q zone %q policy %q", tc.name, c.AdminChain, c.Zone, c.IngressPolicy)
		}
		want := map[int]int{0: forward.DefaultMarkBit, -1: 0}[tc.mark]
		if tc.mark > 0 {
			want = tc.mark
		}
		if *c.MarkBit != want {
			t.Errorf("%s: nftablesMarkBit %d, want %d", tc.name, *c.MarkBit, want)
		}
	}
}

// Upstream's getBackend takes a backend it does not know as absent; ADD
// warns with the value.
func TestUnknownBackendIsAbsent(t *testing.T) {
	c, err := parseConfig([]byte(`{"name": "n", "backend": "ebtables"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Backend != "" || c.unknownBackend != "ebtables" {
		t.Errorf("backend %q, unknownBackend %q; want \"\" and \"ebtables\"", c.Backend, c.unknownBackend)
	}
}
