package ipam

import (
	"context"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/cniforge/plugins/pkg/result"
)

func TestValidateType(t *testing.T) {
	for _, ok := range []string{"host-local", "static", "dhcp", "whereabouts"} {
		if err := ValidateType(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "../host-local", "/usr/bin/evil", `a\b`, "..", "."} {
		if err := ValidateType(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestDelegationRefusesPaths(t *testing.T) {
	// Refused before anything is executed, with code 7.
	if _, err := Add(context.Background(), "../x", nil); result.Code(err) != types.ErrInvalidNetworkConfig {
		t.Errorf("Add: %v", err)
	}
	for name, fn := range map[string]func(context.Context, string, []byte) error{
		"Del": Del, "Check": Check, "GC": GC, "Status": Status,
	} {
		if err := fn(context.Background(), "/bin/x", nil); result.Code(err) != types.ErrInvalidNetworkConfig {
			t.Errorf("%s: %v", name, err)
		}
	}
}
