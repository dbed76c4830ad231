package result

import (
	"net"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

type decodeRange struct {
	Subnet  string `json:"subnet"`
	Gateway net.IP `json:"gateway"`
	Prefix  uint8  `json:"prefix"`
}

type decodeInner struct {
	Table *int `json:"table"`
}

type decodeConf struct {
	IPAM struct {
		Ranges [][]decodeRange `json:"ranges"`
	} `json:"ipam"`
	Rate uint64         `json:"ingressRate"`
	On   bool           `json:"hairpinMode"`
	Meta map[string]int `json:"meta"`
	decodeInner
}

func TestDecodeConfig(t *testing.T) {
	cases := []struct {
		in, path string
		code     uint
		want     string
	}{
		{`{"ingressRate": -1}`, "", types.ErrInvalidNetworkConfig, "ingressRate: -1 is not a whole number, 0 or more"},
		{`{"ingressRate": "5"}`, "", types.ErrInvalidNetworkConfig, `ingressRate: "5" is not a whole number`},
		{`{"table": "abc"}`, "", types.ErrInvalidNetworkConfig, `table: "abc" is not a whole number`},
		{`{"hairpinMode": "yes"}`, "", types.ErrInvalidNetworkConfig, `hairpinMode: "yes" is not true or false`},
		{`{"ipam": {"ranges": [[{"subnet": "a"}, {"subnet": 5}]]}}`, "", types.ErrInvalidNetworkConfig, "ipam.ranges[0][1].subnet: 5 is not a string"},
		{`{"ipam": {"ranges": [[{"prefix": 300}]]}}`, "", types.ErrInvalidNetworkConfig, "ipam.ranges[0][0].prefix: 300 is not a whole number from 0 to 255"},
		{`{"ipam": {"ranges": [[{"gateway": 300}]]}}`, "", types.ErrInvalidNetworkConfig, "ipam.ranges[0][0].gateway: 300 is not a string"},
		{`{"ipam": {"ranges": [[{"gateway": "abc"}]]}}`, "", types.ErrInvalidNetworkConfig, `ipam.ranges[0][0].gateway: "abc" is not an IP address`},
		{`{"ipam": {"ranges": {"a": 1}}}`, "", types.ErrInvalidNetworkConfig, "ipam.ranges: an object is not a list"},
		{`{"ipam": [1]}`, "", types.ErrInvalidNetworkConfig, "ipam: a list is not an object"},
		{`{"meta": {"k": true}}`, "", types.ErrInvalidNetworkConfig, "meta.k: true is not a whole number"},
		{`{"ingressRate": 1.5}`, "ipam.routes[2]", types.ErrInvalidNetworkConfig, "ipam.routes[2].ingressRate: 1.5 is not a whole number"},
		{"{\n  \"ingressRate\": 1,\n  x}", "", types.ErrDecodingFailure, "line 3, column 3"},
		{`{"ingressRate": `, "", types.ErrDecodingFailure, "parse config"},
	}
	for _, c := range cases {
		var conf decodeConf
		err := DecodeConfigAt(c.path, []byte(c.in), &conf)
		if err == nil {
			t.Errorf("%s: no error", c.in)
			continue
		}
		if Code(err) != c.code || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got code %d %q, want code %d and %q", c.in, Code(err), err, c.code, c.want)
		}
		if strings.Contains(err.Error(), "Go struct") || strings.Contains(err.Error(), "decodeInner") {
			t.Errorf("%s: message names Go types: %q", c.in, err)
		}
	}
}
