package attach

import (
	"net"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
)

func TestValidateIPAMResult(t *testing.T) {
	ipn := func(s string) net.IPNet {
		ip, n, err := net.ParseCIDR(s)
		if err != nil {
			t.Fatal(err)
		}
		n.IP = ip
		return *n
	}
	good := func() *current.Result {
		return &current.Result{
			IPs:    []*current.IPConfig{{Address: ipn("10.1.0.2/24"), Gateway: net.ParseIP("10.1.0.1")}},
			Routes: []*types.Route{{Dst: ipn("0.0.0.0/0")}},
		}
	}
	tests := []struct {
		name   string
		mutate func(*current.Result)
		errHas string // "" = valid
	}{
		{"complete", func(*current.Result) {}, ""},
		{"no addresses", func(r *current.Result) { r.IPs = nil }, "no addresses"},
		{"null entry", func(r *current.Result) { r.IPs = append(r.IPs, nil) }, "ips[1] is null"},
		{"entry without address", func(r *current.Result) { r.IPs[0].Address = net.IPNet{} }, "ips[0].address: missing"},
		{"address without prefix", func(r *current.Result) { r.IPs[0].Address.Mask = nil }, "no prefix length"},
		{"prefix of the other family", func(r *current.Result) { r.IPs[0].Address.Mask = net.CIDRMask(64, 128) }, "other family"},
		{"gateway of the other family", func(r *current.Result) { r.IPs[0].Gateway = net.ParseIP("fd00::1") }, "gateway fd00::1"},
		{"interface out of range", func(r *current.Result) {
			i := 3
			r.Interfaces = []*current.Interface{{Name: "eth0"}}
			r.IPs[0].Interface = &i
		}, "ips[0].interface: 3"},
		{"null route", func(r *current.Result) { r.Routes = append(r.Routes, nil) }, "routes[1] is null"},
		{"route without dst", func(r *current.Result) { r.Routes[0].Dst = net.IPNet{} }, "routes[0].dst: missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := good()
			tt.mutate(r)
			err := ValidateIPAMResult("fake", r)
			switch {
			case tt.errHas == "" && err != nil:
				t.Errorf("unexpected error %v", err)
			case tt.errHas != "" && (err == nil || !strings.Contains(err.Error(), tt.errHas)):
				t.Errorf("error %v, want one containing %q", err, tt.errHas)
			}
		})
	}
}

func TestMasqAndMTU(t *testing.T) {
	s := func(v string) *string { return &v }
	for _, b := range []*string{nil, s("iptables"), s("nftables")} {
		if err := (&Masq{IPMasqBackend: b}).Validate(); err != nil {
			t.Errorf("ipMasqBackend %v: %v", b, err)
		}
	}
	for _, b := range []string{"", "ipfw"} {
		err := (&Masq{IPMasqBackend: s(b)}).Validate()
		if err == nil || !strings.Contains(err.Error(), "ipMasqBackend: \""+b+"\"") || codeOf(err) != types.ErrInvalidNetworkConfig {
			t.Errorf("ipMasqBackend %q: %v, want code 7 naming the key", b, err)
		}
	}
	for _, m := range []int{0, 68, 9000, 65535} {
		if err := ValidateMTU(m); err != nil {
			t.Errorf("mtu %d: %v", m, err)
		}
	}
	for _, m := range []int{-1, 67, 65536} {
		if err := ValidateMTU(m); err == nil || codeOf(err) != types.ErrInvalidNetworkConfig {
			t.Errorf("mtu %d: %v, want code 7", m, err)
		}
	}
}

func codeOf(err error) uint {
	if e, ok := err.(*types.Error); ok {
		return e.Code
	}
	return 0
}
