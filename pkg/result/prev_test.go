package result

import (
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

// prevResults that would mislead or crash the plugin following them are
// refused with a code and a message naming the key.
func TestPrevResultRefused(t *testing.T) {
	const ok = `"interfaces": [{"name": "eth0", "sandbox": "/ns"}], "ips": [{"address": "10.0.0.2/24", "interface": 0}]`
	for _, tc := range []struct {
		name, conf string
		code       uint
		names      string
	}{
		{"another version", `"cniVersion": "1.1.0", "prevResult": {"cniVersion": "0.4.0", ` + ok + `}`, types.ErrIncompatibleCNIVersion, `cniVersion "0.4.0"`},
		{"an unknown version", `"cniVersion": "1.1.0", "prevResult": {"cniVersion": "9.9.9", ` + ok + `}`, types.ErrIncompatibleCNIVersion, `"9.9.9"`},
		{"1.0.0 under 1.1.0", `"cniVersion": "1.1.0", "prevResult": {"cniVersion": "1.0.0", ` + ok + `}`, types.ErrIncompatibleCNIVersion, `"1.0.0"`},
		{"no config version is 0.1.0", `"prevResult": {"cniVersion": "1.1.0", ` + ok + `}`, types.ErrIncompatibleCNIVersion, `"0.1.0"`},
		{"null interface", `"cniVersion": "1.1.0", "prevResult": {"cniVersion": "1.1.0", "interfaces": [null]}`, types.ErrInvalidNetworkConfig, "prevResult.interfaces[0]"},
		{"null ip", `"cniVersion": "1.1.0", "prevResult": {"cniVersion": "1.1.0", "ips": [null]}`, types.ErrInvalidNetworkConfig, "prevResult.ips[0]"},
		{"null route", `"cniVersion": "1.1.0", "prevResult": {"cniVersion": "1.1.0", "routes": [null]}`, types.ErrInvalidNetworkConfig, "prevResult.routes[0]"},
		{"interface index past the end", `"cniVersion": "1.1.0", "prevResult": {"cniVersion": "1.1.0", "interfaces": [{"name": "eth0"}], "ips": [{"address": "10.0.0.2/24", "interface": 1}]}`, types.ErrInvalidNetworkConfig, "prevResult.ips[0].interface: 1"},
		{"negative interface index", `"cniVersion": "1.1.0", "prevResult": {"cniVersion": "1.1.0", "interfaces": [{"name": "eth0"}], "ips": [{"address": "10.0.0.2/24", "interface": -1}]}`, types.ErrInvalidNetworkConfig, "prevResult.ips[0].interface: -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := PrevResult([]byte(`{"name": "n", ` + tc.conf + `}`))
			if Code(err) != tc.code || !strings.Contains(err.Error(), tc.names) {
				t.Fatalf("got %v (code %d), want code %d naming %s", err, Code(err), tc.code, tc.names)
			}
		})
	}
	// The same version, or none (pre-1.0 results need not carry one), passes.
	for _, conf := range []string{
		`"cniVersion": "1.1.0", "prevResult": {"cniVersion": "1.1.0", ` + ok + `}`,
		`"cniVersion": "0.4.0", "prevResult": {` + ok + `}`,
	} {
		if _, err := PrevResult([]byte(`{"name": "n", ` + conf + `}`)); err != nil {
			t.Errorf("%s: %v", conf, err)
		}
	}
}
