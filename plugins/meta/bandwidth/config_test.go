package bandwidth

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/cniforge/plugins/pkg/testutil"
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
	// limits checks the parsed limits: want, or none for nil.
	limits := func(want *Entry) func(*testing.T, *netConf) {
		return func(t *testing.T, c *netConf) {
			if want == nil {
				if !c.bw.isZero() {
					t.Errorf("limits %+v, want none", c.bw)
				}
				return
			}
			if *c.bw != *want {
				t.Errorf("limits %+v, want %+v", *c.bw, *want)
			}
		}
	}
	testutil.RunConfigCases(t, func(stdin []byte, _ string) (*netConf, error) { return parseConfig(stdin) }, []testutil.ConfigCase[*netConf]{
		{Name: "no limits", Stdin: base + `}`, Check: limits(nil)},
		{Name: "static", Stdin: base + `, "ingressRate": 8000, "ingressBurst": 800}`, Check: limits(&Entry{IngressRate: 8000, IngressBurst: 800})},
		// Upstream's getBandwidth: runtimeConfig.bandwidth only when the
		// config has none of the four top-level keys; present, even zero,
		// they win.
		{Name: "static over runtime", Stdin: base + `, "ingressRate": 8000, "ingressBurst": 800, "runtimeConfig": {"bandwidth": {"egressRate": 16000, "egressBurst": 1600}}}`,
			Check: func(t *testing.T, c *netConf) {
				limits(&Entry{IngressRate: 8000, IngressBurst: 800})(t, c)
				if !c.runtimeIgnored {
					t.Error("runtimeIgnored false: ADD would not say the runtime's limits went unused")
				}
			}},
		{Name: "static zeros over runtime", Stdin: base + `, "ingressRate": 0, "runtimeConfig": {"bandwidth": {"egressRate": 16000, "egressBurst": 1600}}}`, Check: limits(nil)},
		{Name: "runtime without static", Stdin: base + `, "runtimeConfig": {"bandwidth": {"egressRate": 16000, "egressBurst": 1600}}}`,
			Check: limits(&Entry{EgressRate: 16000, EgressBurst: 1600})},
		{Name: "not JSON", Stdin: `{"name": `, Code: 6},
		{Name: "name not a string", Stdin: `{"name": 1}`, Code: 7, ErrHas: "name: 1 is not a string"},
		{Name: "rate without burst", Stdin: base + `, "ingressRate": 8000}`, Code: 7, ErrHas: "ingressBurst: missing"},
		{Name: "burst without rate", Stdin: base + `, "egressBurst": 8000}`, Code: 7, ErrHas: "egressRate: missing"},
		{Name: "runtime rate without burst", Stdin: base + `, "runtimeConfig": {"bandwidth": {"egressRate": 8000}}}`, Code: 7, ErrHas: "runtimeConfig.bandwidth.egressBurst"},
		{Name: "rate below a byte", Stdin: base + `, "ingressRate": 7, "ingressBurst": 800}`, Code: 7, ErrHas: "ingressRate: 7"},
		{Name: "rate of a byte", Stdin: base + `, "ingressRate": 8, "ingressBurst": 800}`, Check: limits(&Entry{IngressRate: 8, IngressBurst: 800})},
		{Name: "burst below a byte", Stdin: base + `, "ingressRate": 8000, "ingressBurst": 7}`, Code: 7, ErrHas: "ingressBurst: 7"},
		{Name: "burst of a byte", Stdin: base + `, "ingressRate": 8000, "ingressBurst": 8}`, Check: limits(&Entry{IngressRate: 8000, IngressBurst: 8})},
		// Issue 23: a burst over what tbf holds is clamped by tbfFor, not refused.
		{Name: "burst over 4 GiB", Stdin: base + `, "egressRate": 8000, "egressBurst": 40000000000}`, Check: limits(&Entry{EgressRate: 8000, EgressBurst: 40000000000})},
		{Name: "containerd's bursts", Stdin: base + `, "runtimeConfig": {"bandwidth": {"ingressRate": 10000000, "ingressBurst": 4294967295, "egressRate": 10000000, "egressBurst": 4294967295}}}`,
			Check: limits(&Entry{IngressRate: 10000000, IngressBurst: 4294967295, EgressRate: 10000000, EgressBurst: 4294967295})},
		{Name: "CRI-O's bursts", Stdin: base + `, "runtimeConfig": {"bandwidth": {"ingressRate": 1000000, "ingressBurst": 34359738367, "egressRate": 1000000, "egressBurst": 34359738368}}}`,
			Check: limits(&Entry{IngressRate: 1000000, IngressBurst: 34359738367, EgressRate: 1000000, EgressBurst: 34359738368})},
		{Name: "negative", Stdin: base + `, "egressRate": -1, "egressBurst": 1}`, Code: 7, ErrHas: "egressRate: -1 is not a whole number"},
	})
}

func TestTbfFor(t *testing.T) {
	const tick = 15.625 // the usual /proc/net/psched
	p, burst, clamped := tbfFor(4_000_000, 400_000, tick)
	// 500000 B/s; 50000 B is 0.1 s = 100000 us = 1562500 ticks; limit is
	// 25 ms of rate plus the burst.
	if p.Rate != 500_000 || p.Buffer != 1_562_500 || p.Limit != 12_500+50_000 || burst != 400_000 || clamped {
		t.Errorf("tbfFor = %+v, %d, %v", p, burst, clamped)
	}
}

// Issue 23: the bursts runtimes send whatever the pod says. containerd:
// 4294967295 bits (math.MaxUint32); CRI-O v1.34: 34359738359 as sent
// (math.MaxUint32*8-1, seen in the Kubernetes lane's crio stage; 2^35-1 =
// 34359738367 kept as a neighbour), older CRI-O
// math.MaxUint32*8 = 34359738360. tbf's buffer is a 32-bit count of
// ticks: at 15.625 ticks/us, 2^32-1 ticks are 274877906.88 us of traffic.
// Each is installed, clamped to that where it is longer, and the limit
// (25 ms of traffic plus the burst) stops at 2^32-1 bytes. As upstream,
// the burst is turned into whole microseconds, then whole ticks.
func TestTbfForRuntimeBursts(t *testing.T) {
	const (
		tick       = 15.625
		containerd = 4294967295
		crio       = 34359738367
		crioSrc    = 34359738359
		crioOld    = 34359738360
		over32     = 34359738368 // 2^32 bytes: one more than 32 bits hold
		maxUint32  = 4294967295
		clamp1M    = 34359738   // bytes: 274877906.88 us * 0.125 B/us
		clamp10M   = 343597383  // bytes: 274877906.88 us * 1.25 B/us
		clamp100M  = 3435973836 // bytes: 274877906.88 us * 12.5 B/us
		cdBytes    = 536870911  // containerd's, in bytes: 4294967295 / 8
	)
	type want struct {
		p         tbfParams
		installed uint64 // bytes
		clamped   bool
	}
	// Below 100 Mbit/s every runtime value is more than 275 s of traffic.
	at1M := want{tbfParams{125_000, 4_294_967_250, 3_125 + clamp1M}, clamp1M, true}
	at10M := want{tbfParams{1_250_000, 4_294_967_281, 31_250 + clamp10M}, clamp10M, true}
	at100M := want{tbfParams{12_500_000, 4_294_967_281, 312_500 + clamp100M}, clamp100M, true}
	for _, tc := range []struct {
		rate, burst uint64
		want        want
	}{
		{1_000_000, containerd, at1M}, {1_000_000, crio, at1M}, {1_000_000, crioSrc, at1M}, {1_000_000, crioOld, at1M},
		{10_000_000, containerd, at10M}, {10_000_000, crio, at10M}, {10_000_000, crioSrc, at10M}, {10_000_000, crioOld, at10M},
		// 100 Mbit/s: containerd's 537 MB is 43 s and fits (42949672 us =
		// 671088625 ticks, what upstream installs too); CRI-O's 4.3 GB
		// clamps to 3.4 GB.
		{100_000_000, containerd, want{tbfParams{12_500_000, 671_088_625, 312_500 + cdBytes}, cdBytes, false}},
		{100_000_000, crio, at100M}, {100_000_000, crioSrc, at100M}, {100_000_000, crioOld, at100M},
		// 1 Gbit/s: containerd's fits (4294967 us = 67108859 ticks);
		// CRI-O's 4294967295 B (4294967294 from its source) fit the buffer
		// (34359738 us) but not the limit, which stops at 2^32-1; a byte
		// more than 32 bits hold clamps to 2^32-1.
		{1_000_000_000, containerd, want{tbfParams{125_000_000, 67_108_859, 3_125_000 + cdBytes}, cdBytes, false}},
		{1_000_000_000, crio, want{tbfParams{125_000_000, 536_870_906, maxUint32}, maxUint32, false}},
		{1_000_000_000, crioSrc, want{tbfParams{125_000_000, 536_870_906, maxUint32}, maxUint32 - 1, false}},
		{1_000_000_000, crioOld, want{tbfParams{125_000_000, 536_870_906, maxUint32}, maxUint32, false}},
		{1_000_000_000, over32, want{tbfParams{125_000_000, 536_870_906, maxUint32}, maxUint32, true}},
	} {
		t.Run(fmt.Sprintf("%d bit/s, burst %d", tc.rate, tc.burst), func(t *testing.T) {
			p, burst, clamped := tbfFor(tc.rate, tc.burst, tick)
			w := tc.want
			if p != w.p || burst != w.installed*8 || clamped != w.clamped {
				t.Errorf("tbfFor = %+v, burst %d bits, clamped %v; want %+v, %d bits, %v", p, burst, clamped, w.p, w.installed*8, w.clamped)
			}
		})
	}
}

// The largest burst tbf holds is installed as it is; one byte more is
// clamped to it.
func TestTbfForBound(t *testing.T) {
	const tick = 15.625
	const most = 34359738 // bytes at 1 Mbit/s, as above
	if p, burst, clamped := tbfFor(1_000_000, most*8, tick); clamped || burst != most*8 || p.Buffer != 4_294_967_250 {
		t.Errorf("at the bound: %+v, %d bits, clamped %v; want %d bits, not clamped", p, burst, clamped, most*8)
	}
	if p, burst, clamped := tbfFor(1_000_000, most*8+8, tick); !clamped || burst != most*8 || p.Buffer != 4_294_967_250 {
		t.Errorf("a byte over: %+v, %d bits, clamped %v; want %d bits, clamped", p, burst, clamped, most*8)
	}
}

// A type error names the key as the user wrote it, at the top level and in
// runtimeConfig, for attach.Decode to report as code 7 (issue 22): an
// embedded Entry made it "Entry.ingressRate".
func TestTypeErrorNamesTheKey(t *testing.T) {
	for in, key := range map[string]string{
		`{"name": "n", "ingressRate": -1}`:                                    "ingressRate",
		`{"name": "n", "egressBurst": "abc"}`:                                 "egressBurst",
		`{"name": "n", "runtimeConfig": {"bandwidth": {"ingressBurst": -1}}}`: "runtimeConfig.bandwidth.ingressBurst",
	} {
		var te *json.UnmarshalTypeError
		if err := json.Unmarshal([]byte(in), &netConf{}); !errors.As(err, &te) || te.Field != key {
			t.Errorf("%s: %v, want a type error at %q", in, err, key)
		}
	}
}

// Upstream's tbf parameters, as Debian's upstream 1.1.1 binary installed
// them here (read back with tc): CHECK accepts an attachment upstream made.
// Where the burst fits, ours are the same; where ours clamp, upstream's
// tick count wrapped past 32 bits.
func TestUpstreamTbf(t *testing.T) {
	const tick = 15.625
	for _, tc := range []struct {
		rate, burst uint64
		want        tbfParams
		same        bool // tbfFor gives the same
	}{
		{3_000_000, 333_333, tbfParams{375_000, 1_736_078, 51_041}, true},
		{100_000_000, 4294967295, tbfParams{12_500_000, 671_088_625, 537_183_411}, true},
		{10_000_000, 4294967295, tbfParams{1_250_000, 2_415_919_079, 536_902_161}, false},
	} {
		got := upstreamTbf(tc.rate, tc.burst, tick)
		if got != tc.want {
			t.Errorf("upstreamTbf(%d, %d) = %+v, want %+v", tc.rate, tc.burst, got, tc.want)
		}
		if ours, _, _ := tbfFor(tc.rate, tc.burst, tick); (ours == tc.want) != tc.same {
			t.Errorf("tbfFor(%d, %d) = %+v; upstream's %+v; want the same: %v", tc.rate, tc.burst, ours, tc.want, tc.same)
		}
	}
}
