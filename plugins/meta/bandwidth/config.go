package bandwidth

import (
	"encoding/json"
	"fmt"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/result"
)

// Entry is one set of limits: rates in bits per second, bursts in bits.
// A rate needs its burst and a burst its rate; 0 and 0 is "no limit".
type Entry struct {
	IngressRate  uint64 `json:"ingressRate"`
	IngressBurst uint64 `json:"ingressBurst"`
	EgressRate   uint64 `json:"egressRate"`
	EgressBurst  uint64 `json:"egressBurst"`
}

func (e *Entry) isZero() bool {
	return e == nil || (e.IngressRate == 0 && e.IngressBurst == 0 && e.EgressRate == 0 && e.EgressBurst == 0)
}

// netConf is bandwidth's config. Keys are upstream's. The top-level
// limits are fields of their own, not an embedded Entry: a type error then
// names the key as the user wrote it ("ingressRate"), not a Go path
// ("Entry.ingressRate"), for Decode to report (issue 22).
type netConf struct {
	attach.NetConf
	IngressRate   uint64 `json:"ingressRate"`
	IngressBurst  uint64 `json:"ingressBurst"`
	EgressRate    uint64 `json:"egressRate"`
	EgressBurst   uint64 `json:"egressBurst"`
	RuntimeConfig struct {
		Bandwidth *Entry `json:"bandwidth,omitempty"`
	} `json:"runtimeConfig,omitempty"`

	// bw is the limits in force: the top-level keys when the config has
	// any, else runtimeConfig.bandwidth; nil: none.
	bw *Entry
	// runtimeIgnored: the runtime passed runtimeConfig.bandwidth, and the
	// top-level keys took precedence (ADD logs it).
	runtimeIgnored bool
}

// hasTopLevelKey reports whether the config holds any of the four
// top-level rate and burst keys, zero or not.
func (c *netConf) hasTopLevelKey() bool {
	var raw map[string]json.RawMessage
	_ = json.Unmarshal(c.Raw, &raw) // decoded successfully by attach.Decode
	for _, k := range []string{"ingressRate", "ingressBurst", "egressRate", "egressBurst"} {
		if _, ok := raw[k]; ok {
			return true
		}
	}
	return false
}

func parse(args *skel.CmdArgs) (*netConf, error) { return parseConfig(args.StdinData) }

// parseConfig decodes and validates stdin, the same way for every
// command. It touches no kernel state and leaves prevResult unparsed.
func parseConfig(stdin []byte) (*netConf, error) {
	c := &netConf{}
	if err := attach.Decode(stdin, c); err != nil {
		return nil, err
	}
	// Upstream's getBandwidth: the top-level keys when any of them is
	// there (its embedded *BandwidthEntry is then set, zeros and all),
	// runtimeConfig.bandwidth only otherwise.
	top := Entry{c.IngressRate, c.IngressBurst, c.EgressRate, c.EgressBurst}
	switch {
	case c.hasTopLevelKey():
		if !top.isZero() {
			c.bw = &top
		}
		c.runtimeIgnored = c.RuntimeConfig.Bandwidth != nil
	case c.RuntimeConfig.Bandwidth != nil:
		c.bw = c.RuntimeConfig.Bandwidth
	}
	if c.bw == nil {
		return c, nil
	}
	prefix := ""
	if c.bw == c.RuntimeConfig.Bandwidth {
		prefix = "runtimeConfig.bandwidth."
	}
	if err := validateRateBurst(prefix+"ingress", c.bw.IngressRate, c.bw.IngressBurst); err != nil {
		return nil, err
	}
	if err := validateRateBurst(prefix+"egress", c.bw.EgressRate, c.bw.EgressBurst); err != nil {
		return nil, err
	}
	return c, nil
}

// validateRateBurst checks what needs no kernel: a rate with its burst, a
// rate of at least a byte per second, a burst of at least a byte. A burst
// too large for tbf is not refused here: tbfFor clamps it (issue 23).
func validateRateBurst(dir string, rate, burst uint64) error {
	switch {
	case rate != 0 && burst == 0:
		return result.InvalidConfig(fmt.Errorf("%sBurst: missing (%sRate is %d; a rate needs its burst)", dir, dir, rate))
	case rate == 0 && burst != 0:
		return result.InvalidConfig(fmt.Errorf("%sRate: missing (%sBurst is %d; a burst needs its rate)", dir, dir, burst))
	case rate != 0 && rate < 8:
		return result.InvalidConfig(fmt.Errorf("%sRate: %d bit/s is below tbf's 1 byte/s", dir, rate))
	case burst != 0 && burst < 8:
		return result.InvalidConfig(fmt.Errorf("%sBurst: %d bits is below tbf's 1 byte", dir, burst))
	}
	return nil
}
