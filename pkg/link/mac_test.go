package link

import (
	"strings"
	"testing"

	"github.com/cniforge/plugins/pkg/result"
)

func TestPickMAC(t *testing.T) {
	const (
		rc  = "02:00:00:00:00:01"
		ac  = "02:00:00:00:00:02"
		env = "02:00:00:00:00:03"
		key = "02:00:00:00:00:04"
	)
	tests := []struct {
		name    string
		src     MACSources
		cniArgs string
		want    string // "" = nil
		code    uint
		errHas  string
	}{
		{name: "none", want: ""},
		{name: "runtimeConfig wins", src: MACSources{RuntimeConfig: rc, ArgsCNI: ac, Key: key}, cniArgs: "MAC=" + env, want: rc},
		{name: "args.cni next", src: MACSources{ArgsCNI: ac, Key: key}, cniArgs: "MAC=" + env, want: ac},
		{name: "CNI_ARGS next", src: MACSources{Key: key}, cniArgs: "IgnoreUnknown=1;MAC=" + env, want: env},
		{name: "key last", src: MACSources{Key: key}, want: key},
		{name: "upper case", src: MACSources{Key: "02:AA:BB:CC:DD:EE"}, want: "02:aa:bb:cc:dd:ee"},
		{name: "bad runtimeConfig", src: MACSources{RuntimeConfig: "nope"}, code: 7, errHas: `runtimeConfig.mac: "nope"`},
		{name: "bad args.cni", src: MACSources{ArgsCNI: "01:00:00:00:00:01"}, code: 7, errHas: "args.cni.mac"},
		{name: "multicast key", src: MACSources{Key: "01:00:5e:00:00:01"}, code: 7, errHas: `mac: "01:00:5e:00:00:01": is a multicast`},
		{name: "infiniband key", src: MACSources{Key: "00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01"}, code: 7, errHas: "6-byte"},
		{name: "bad CNI_ARGS MAC", cniArgs: "MAC=zz", code: 4, errHas: `CNI_ARGS MAC: "zz"`},
		{name: "CNI_ARGS does not parse", cniArgs: "MAC", code: 4, errHas: "CNI_ARGS"},
		{name: "unknown CNI_ARGS key", cniArgs: "FOO=1", code: 4, errHas: "CNI_ARGS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mac, err := PickMAC(tt.src, tt.cniArgs)
			if tt.code != 0 {
				if err == nil {
					t.Fatalf("accepted, MAC %s", mac)
				}
				if got := result.Code(err); got != tt.code {
					t.Errorf("code %d, want %d (%v)", got, tt.code, err)
				}
				if !strings.Contains(err.Error(), tt.errHas) {
					t.Errorf("error %q does not name %q", err, tt.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := mac.String(); (mac == nil && tt.want != "") || (mac != nil && got != tt.want) {
				t.Errorf("MAC %q, want %q", got, tt.want)
			}
		})
	}
}
