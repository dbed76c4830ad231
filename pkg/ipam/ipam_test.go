package ipam

import (
	"context"
	"net"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

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

func TestRouteKeepsOnLinkRoutesOnLink(t *testing.T) {
	_, dst, _ := net.ParseCIDR("192.168.7.0/24")
	gw := net.IPv4(10, 99, 0, 1)
	ips := []*current.IPConfig{{Address: net.IPNet{IP: net.IPv4(10, 99, 0, 20), Mask: net.CIDRMask(24, 32)}, Gateway: gw}}

	link := int(netlink.SCOPE_LINK)
	if r := Route(2, &types.Route{Dst: *dst, Scope: &link}, ips); r.Gw != nil || r.Scope != netlink.SCOPE_LINK {
		t.Errorf("link-scope route got gateway %v, scope %v", r.Gw, r.Scope)
	}
	if r := Route(2, &types.Route{Dst: *dst}, ips); !r.Gw.Equal(gw) {
		t.Errorf("route without scope got gateway %v, want %v", r.Gw, gw)
	}
}
