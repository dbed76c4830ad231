package bandwidth

import (
	"crypto/sha512"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"

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

	// bw is the limits in force: runtimeConfig.bandwidth when the runtime
	// passed it, else the top-level keys; nil: none.
	bw *Entry
}

func parse(args *skel.CmdArgs) (*netConf, error) { return parseConfig(args.StdinData) }

// parseConfig decodes and validates stdin, the same way for every
// command. It touches no kernel state and leaves prevResult unparsed.
func parseConfig(stdin []byte) (*netConf, error) {
	c := &netConf{}
	if err := attach.Decode(stdin, c); err != nil {
		return nil, err
	}
	if top := (Entry{c.IngressRate, c.IngressBurst, c.EgressRate, c.EgressBurst}); !top.isZero() {
		c.bw = &top
	}
	if c.RuntimeConfig.Bandwidth != nil {
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

// latencyUsec is how long a packet may wait in tbf (upstream's 25 ms):
// it sets the queue limit.
const latencyUsec = 25000

// tbfParams are the values of one tbf qdisc: rate in bytes/s, buffer in
// the kernel's ticks, limit in bytes.
type tbfParams struct {
	Rate   uint64
	Buffer uint32
	Limit  uint32
}

// tbfFor computes tbf's parameters as upstream does (the burst as whole
// microseconds at the rate, then ticks, both truncated), with tick the
// kernel's ticks per microsecond (netlink.TickInUsec). tbf holds its burst
// as time in a 32-bit count of ticks (2^32 ticks of 64 ns: about 275 s of
// traffic at the rate) and its queue limit (25 ms of traffic plus the
// burst) in a 32-bit count of bytes. Runtimes send bursts far beyond that:
// containerd 4294967295 bits, CRI-O 34359738367 (issue 23). So a burst
// more than tbf can hold at the rate, or of more than 2^32-1 bytes, is
// clamped to the largest one it can hold, and a limit over 2^32-1 bytes to
// that. burst is the burst installed, in bits; clamped says whether it is
// less than the config asks. The same config gives the same parameters, so
// CHECK accepts what ADD installed.
func tbfFor(rateBits, burstBits uint64, tick float64) (p tbfParams, burst uint64, clamped bool) {
	rate := rateBits / 8
	bytes := burstBits / 8
	most := min(uint64(math.MaxUint32/tick*float64(rate)/1e6), math.MaxUint32)
	if bytes > most {
		bytes, clamped = most, true
	}
	usec := math.Trunc(float64(bytes) * 1e6 / float64(rate))
	buffer := min(math.Trunc(usec*tick), math.MaxUint32)
	limit := min(uint64(float64(rate)*latencyUsec/1e6)+bytes, math.MaxUint32)
	return tbfParams{Rate: rate, Buffer: uint32(buffer), Limit: uint32(limit)}, bytes * 8, clamped
}

// upstreamTbf is what upstream's ADD installs for the same rate and
// burst: where ours clamps, its 32-bit conversions wrap (Go's conversion
// of a float out of range, on amd64: through int64, keeping the low 32
// bits). CHECK accepts it too, so an attachment upstream made before the
// node switched suites passes. Upstream refuses bursts of 4 GiB and more.
func upstreamTbf(rateBits, burstBits uint64, tick float64) tbfParams {
	rate, bytes := rateBits/8, uint32(burstBits/8)
	usec := uint32(int64(float64(bytes) * 1e6 / float64(rate)))
	buffer := uint32(int64(float64(usec) * tick))
	limit := uint32(int64(float64(rate)*latencyUsec/1e6)) + bytes
	return tbfParams{Rate: rate, Buffer: buffer, Limit: limit}
}

// IfbName is the ifb device upstream names for an attachment: "bwp" and
// the hex of SHA-512(network name + container ID), 15 characters in all.
func IfbName(network, containerID string) string {
	sum := sha512.Sum512([]byte(network + containerID))
	return ("bwp" + hex.EncodeToString(sum[:]))[:15]
}

// IfbGroup is the link group (IFLA_GROUP) an ifb of network gets when it
// is made, in the same netlink message: the alias takes a second one, and
// an ADD killed between the two would leave an ifb GC could not tell as
// this network's (issue 14, kills mid-ADD). Never 0, the kernel's default
// group, which upstream's ifbs keep.
func IfbGroup(network string) uint32 {
	sum := sha512.Sum512([]byte("cni-bandwidth:" + network))
	return max(binary.BigEndian.Uint32(sum[:4]), 1)
}

// ifbAlias marks an ifb as this suite's, for the network (GC collects only
// its own network's: the name does not say which network it is of).
func ifbAlias(network, containerID string) string {
	return "cni-bandwidth:" + network + ":" + containerID
}
