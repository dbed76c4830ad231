package link

import (
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/result"
)

func TestParseMode(t *testing.T) {
	modes := []NamedMode[int]{{1, "bridge"}, {2, "private"}, {3, "vepa"}}
	if name, m, err := ParseMode("", "bridge", modes); err != nil || name != "bridge" || m != 1 {
		t.Errorf("default: %q %d %v", name, m, err)
	}
	if name, m, err := ParseMode("vepa", "bridge", modes); err != nil || name != "vepa" || m != 3 {
		t.Errorf("vepa: %q %d %v", name, m, err)
	}
	_, _, err := ParseMode("hub", "bridge", modes)
	if result.Code(err) != types.ErrInvalidNetworkConfig || !strings.Contains(err.Error(), `mode: "hub" is not one of bridge, private, vepa`) {
		t.Errorf("unknown mode: %v", err)
	}
}

func TestKeysValidate(t *testing.T) {
	for _, tc := range []struct {
		keys       Keys
		ipam       string
		typelessL2 bool
		want       string // "" = valid
		l3         bool
	}{
		{Keys{}, `{}`, false, "", false},
		{Keys{Master: "eth1", MTU: 1400}, `{"type": "host-local"}`, false, "", true},
		{Keys{Master: "a/b"}, `{}`, false, "master", false},
		{Keys{MTU: -1}, `{}`, false, "mtu", false},
		{Keys{}, `{"subnet": "10.0.0.0/24"}`, false, "ipam.type: missing", false},
		{Keys{}, `{"type": ""}`, false, "ipam.type: missing", false},
		{Keys{}, `{"subnet": "10.0.0.0/24"}`, true, "", false},
		{Keys{}, `{"type": ""}`, true, "", false},
		{Keys{}, `{"type": "host-local"}`, true, "", true},
	} {
		c := &attach.NetConf{}
		if err := attach.Decode([]byte(`{"cniVersion": "1.1.0", "name": "n", "ipam": `+tc.ipam+`}`), c); err != nil {
			t.Fatal(err)
		}
		l3, err := tc.keys.Validate(c, tc.typelessL2)
		switch {
		case tc.want == "" && (err != nil || l3 != tc.l3):
			t.Errorf("%+v %s: layer3 %v, %v", tc.keys, tc.ipam, l3, err)
		case tc.want != "" && (result.Code(err) != types.ErrInvalidNetworkConfig || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v %s: %v, want code 7 naming %q", tc.keys, tc.ipam, err, tc.want)
		}
	}
}
