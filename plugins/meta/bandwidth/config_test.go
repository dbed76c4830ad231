package bandwidth

import (
	"strings"
	"testing"

	"github.com/cniforge/plugins/pkg/result"
)

func TestIfbName(t *testing.T) {
	// Upstream's name for network "mynet" and container "abc": "bwp" and
	// the first 12 hex digits of SHA-512("mynetabc").
	// (python3 -c 'import hashlib; print(hashlib.sha512(b"mynetabc").hexdigest()[:12])')
	if got, want := IfbName("mynet", "abc"), "bwpe88f49d94512"; got != want {
		t.Errorf("IfbName = %q, want %q", got, want)
	}
}

func TestParseConfig(t *testing.T) {
	const base = `{"cniVersion": "1.0.0", "name": "n", "type": "bandwidth"`
	for _, tc := range []struct {
		name, stdin string
		code        uint
		msg         string
		want        *Entry
	}{
		{name: "no limits", stdin: base + `}`},
		{name: "static", stdin: base + `, "ingressRate": 8000, "ingressBurst": 800}`, want: &Entry{IngressRate: 8000, IngressBurst: 800}},
		{name: "runtime overrides static", stdin: base + `, "ingressRate": 8000, "ingressBurst": 800, "runtimeConfig": {"bandwidth": {"egressRate": 16000, "egressBurst": 1600}}}`,
			want: &Entry{EgressRate: 16000, EgressBurst: 1600}},
		{name: "not JSON", stdin: `{"name": `, code: 6},
		{name: "name not a string", stdin: `{"name": 1}`, code: 7, msg: "name: 1 is not a string"},
		{name: "rate without burst", stdin: base + `, "ingressRate": 8000}`, code: 7, msg: "ingressBurst: missing"},
		{name: "burst without rate", stdin: base + `, "egressBurst": 8000}`, code: 7, msg: "egressRate: missing"},
		{name: "runtime rate without burst", stdin: base + `, "runtimeConfig": {"bandwidth": {"egressRate": 8000}}}`, code: 7, msg: "runtimeConfig.bandwidth.egressBurst"},
		{name: "rate below a byte", stdin: base + `, "ingressRate": 7, "ingressBurst": 800}`, code: 7, msg: "ingressRate: 7"},
		{name: "burst over 4 GiB", stdin: base + `, "egressRate": 8000, "egressBurst": 40000000000}`, code: 7, msg: "egressBurst: 40000000000"},
		{name: "negative", stdin: base + `, "egressRate": -1, "egressBurst": 1}`, code: 7, msg: "egressRate: -1 is not a whole number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseConfig([]byte(tc.stdin))
			if tc.code != 0 {
				if err == nil || result.Code(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
					t.Errorf("err %v (code %d), want code %d naming %q", err, result.Code(err), tc.code, tc.msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil {
				if !c.bw.isZero() {
					t.Errorf("limits %+v, want none", c.bw)
				}
				return
			}
			if *c.bw != *tc.want {
				t.Errorf("limits %+v, want %+v", *c.bw, *tc.want)
			}
		})
	}
}

func TestTbfFor(t *testing.T) {
	const tick = 15.625 // the usual /proc/net/psched
	p, err := tbfFor("ingress", 4_000_000, 400_000, tick)
	if err != nil {
		t.Fatal(err)
	}
	// 500000 B/s; 50000 B is 0.1 s = 100000 us = 1562500 ticks; limit is
	// 25 ms of rate plus the burst.
	if p.Rate != 500_000 || p.Buffer != 1_562_500 || p.Limit != 12_500+50_000 {
		t.Errorf("tbfFor = %+v", p)
	}
	if _, err := tbfFor("egress", 8, 1<<34, tick); err == nil || result.Code(err) != 7 || !strings.Contains(err.Error(), "egressBurst") {
		t.Errorf("a burst of hours at 1 B/s: %v, want code 7 naming egressBurst", err)
	}
	if _, err := tbfFor("ingress", 1<<42, 8*1000, tick); err == nil || !strings.Contains(err.Error(), "ingressRate") {
		t.Errorf("a queue over 4 GiB: %v, want code 7 naming ingressRate", err)
	}
}
