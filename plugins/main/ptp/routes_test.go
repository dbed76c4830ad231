package ptp

import (
	"net"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/result"
)

func ipc(addr, gw string) *current.IPConfig {
	ipa, n, err := net.ParseCIDR(addr)
	if err != nil {
		panic(err)
	}
	n.IP = ipa
	return &current.IPConfig{Address: *n, Gateway: net.ParseIP(gw)}
}

func route(dst, gw string) *types.Route {
	_, n, err := net.ParseCIDR(dst)
	if err != nil {
		panic(err)
	}
	return &types.Route{Dst: *n, GW: net.ParseIP(gw)}
}

func dualStack() *current.Result {
	return &current.Result{
		IPs:    []*current.IPConfig{ipc("10.1.1.2/24", "10.1.1.1"), ipc("fd00:1::2/64", "fd00:1::1")},
		Routes: []*types.Route{route("0.0.0.0/0", ""), route("10.9.0.0/16", "10.1.1.254"), route("::/0", "")},
	}
}

func render(t *testing.T, f func() []string) string {
	t.Helper()
	return strings.Join(f(), "\n")
}

func TestContainerRoutes(t *testing.T) {
	got := render(t, func() []string {
		var out []string
		for _, r := range containerRoutes(7, dualStack()) {
			s := ip.RouteString(r)
			if r.Src != nil {
				s += " src " + r.Src.String()
			}
			out = append(out, s)
		}
		return out
	})
	want := strings.Join([]string{
		"10.1.1.1/32 dev #7 src 10.1.1.2",
		"10.1.1.0/24 via 10.1.1.1 dev #7 src 10.1.1.2",
		"fd00:1::1/128 dev #7 src fd00:1::2",
		"fd00:1::/64 via fd00:1::1 dev #7 src fd00:1::2",
		"default via 10.1.1.1 dev #7",
		"10.9.0.0/16 via 10.1.1.254 dev #7",
		"default via fd00:1::1 dev #7",
	}, "\n")
	if got != want {
		t.Errorf("routes:\n%s\nwant:\n%s", got, want)
	}
}

func TestContainerRoutesSingleAddress(t *testing.T) {
	res := &current.Result{IPs: []*current.IPConfig{ipc("10.1.1.2/32", "10.1.1.1")}}
	routes := containerRoutes(3, res)
	if len(routes) != 1 || routes[0].Dst.String() != "10.1.1.1/32" {
		t.Errorf("a /32 address gets only the gateway route, got %v", routes)
	}
}

func TestHostSide(t *testing.T) {
	res := dualStack()
	var addrs []string
	for _, a := range hostAddrs(res) {
		addrs = append(addrs, a.IPNet.String())
	}
	if got, want := strings.Join(addrs, " "), "10.1.1.1/32 fd00:1::1/128"; got != want {
		t.Errorf("host addresses %q, want %q", got, want)
	}
	var routes []string
	for _, r := range hostRoutes(9, res) {
		routes = append(routes, ip.RouteString(r))
	}
	if got, want := strings.Join(routes, ", "), "10.1.1.2/32 dev #9, fd00:1::2/128 dev #9"; got != want {
		t.Errorf("host routes %q, want %q", got, want)
	}
}

func TestValidateIPAMResult(t *testing.T) {
	tests := []struct {
		name   string
		res    *current.Result
		errHas string
	}{
		{"dual-stack", dualStack(), ""},
		{"no gateway", &current.Result{IPs: []*current.IPConfig{ipc("10.1.1.2/24", "")}}, "10.1.1.2/24 without a gateway"},
		{"gateway is the address", &current.Result{IPs: []*current.IPConfig{ipc("10.1.1.2/24", "10.1.1.2")}}, "itself"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validateIPAMResult("host-local", tt.res)
			if tt.errHas == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.errHas) {
				t.Errorf("error %v, want one containing %q", err, tt.errHas)
			}
			// The IPAM config is what to fix (issue 8, defect 6).
			if got := result.Code(err); got != types.ErrInvalidNetworkConfig {
				t.Errorf("code %d, want 7", got)
			}
		})
	}
}
