package hostlocal

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/cniforge/plugins/pkg/result"
)

// defaultDataDir is upstream's: one folder per network name below it.
const defaultDataDir = "/var/lib/cni/networks"

// Config is a validated host-local configuration: everything a command needs,
// checked before any file is touched.
type Config struct {
	CNIVersion string
	Name       string // network name = folder name below DataDir
	DataDir    string
	ResolvConf string // "" = no DNS in the result
	Routes     []*types.Route
	// RangeSets are in upstream's order: runtimeConfig.ipRanges, the legacy
	// top-level range, then ipam.ranges. The index names last_reserved_ip.<index>.
	RangeSets []RangeSet
	// Requested maps a range set index to the address asked for in it.
	Requested map[int]netip.Addr
	// FailStatusWhenFull (ipam.failStatusWhenFull) makes STATUS fail when a
	// range set has no free address. Off by default: containerd 2.x runs
	// STATUS on every CRI Status call and turns a failure into a NotReady
	// node, whose pods the kubelet evicts; a full range should fail only
	// the ADD that needs an address.
	FailStatusWhenFull bool
}

// RangeSet is the pool one address is drawn from.
type RangeSet struct {
	Key    string // config key, for messages: "ipam.ranges[1]"
	Ranges []Range
}

// Range is a validated address range with its defaults filled in.
type Range struct {
	Subnet  netip.Prefix // masked
	Start   netip.Addr
	End     netip.Addr
	Gateway netip.Addr
}

// netConf is the JSON a host-local invocation receives.
type netConf struct {
	CNIVersion    string  `json:"cniVersion"`
	Name          string  `json:"name"`
	IPAM          *ipamIn `json:"ipam"`
	RuntimeConfig struct {
		IPs      []string    `json:"ips"`
		IPRanges [][]rangeIn `json:"ipRanges"`
	} `json:"runtimeConfig"`
	Args *struct {
		CNI *struct {
			IPs []string `json:"ips"`
		} `json:"cni"`
	} `json:"args"`
}

type ipamIn struct {
	Type string `json:"type"`
	rangeIn
	Ranges     [][]rangeIn `json:"ranges"`
	Routes     []routeIn   `json:"routes"`
	DataDir    string      `json:"dataDir"`
	ResolvConf string      `json:"resolvConf"`
	// FailStatusWhenFull is ours (upstream's STATUS always succeeds).
	FailStatusWhenFull bool `json:"failStatusWhenFull"`
}

type rangeIn struct {
	Subnet     string `json:"subnet"`
	RangeStart string `json:"rangeStart"`
	RangeEnd   string `json:"rangeEnd"`
	Gateway    string `json:"gateway"`
}

// routeIn is a route of "routes": dst and gw, and the attributes a 1.1.0
// result carries (cni's types.Route), kept as written, as upstream keeps
// the whole route.
type routeIn struct {
	Dst      string `json:"dst"`
	GW       string `json:"gw"`
	MTU      int    `json:"mtu"`
	AdvMSS   int    `json:"advmss"`
	Priority int    `json:"priority"`
	Table    *int   `json:"table"`
	Scope    *int   `json:"scope"`
}

// parseConfig decodes, defaults and validates the network config every
// command shares. It is pure: no files, no kernel. Errors carry their CNI
// code (6 malformed JSON, 7 invalid config) and name the key at fault.
func parseConfig(stdin []byte) (*Config, error) {
	conf, _, err := decodeConfig(stdin)
	return conf, err
}

// ParseConfig is parseConfig for other packages: the node tool (cniforge
// ls) reads a network's ranges and data folder with it.
func ParseConfig(stdin []byte) (*Config, error) { return parseConfig(stdin) }

// parseAddConfig is parseConfig plus what only ADD uses: the requested
// addresses (from runtimeConfig.ips, args.cni.ips or CNI_ARGS) and whether
// the requested cniVersion's result can carry every address. DEL, CHECK and
// GC ignore these, so a DEL after a refused ADD (same args) still succeeds.
func parseAddConfig(stdin []byte, cniArgs string) (*Config, error) {
	conf, in, err := decodeConfig(stdin)
	if err != nil {
		return nil, err
	}
	if err := checkOldResultFits(conf.CNIVersion, conf.RangeSets); err != nil {
		return nil, result.InvalidConfig(err)
	}
	if err := conf.assignRequested(in, cniArgs); err != nil {
		return nil, result.InvalidConfig(err)
	}
	return conf, nil
}

func decodeConfig(stdin []byte) (*Config, *netConf, error) {
	var in netConf
	if err := result.DecodeConfig(stdin, &in); err != nil {
		return nil, nil, err
	}
	conf, err := buildConfig(&in)
	if err != nil {
		return nil, nil, result.InvalidConfig(err)
	}
	return conf, &in, nil
}

// parseDelConfig is DEL's parse of a config that no longer validates: the
// network's name and dataDir, which find the reservations, and nothing
// else.
func parseDelConfig(stdin []byte) (*Config, error) {
	var in netConf
	if err := result.DecodeConfig(stdin, &in); err != nil {
		return nil, err
	}
	conf, err := baseConfig(&in)
	if err != nil {
		return nil, result.InvalidConfig(err)
	}
	return conf, nil
}

// baseConfig checks and defaults what every command needs, and all that
// DEL of a config that no longer validates needs: the network's name (its
// folder) and dataDir.
func baseConfig(in *netConf) (*Config, error) {
	if err := validateNetworkName(in.Name); err != nil {
		return nil, err
	}
	if in.IPAM == nil {
		return nil, errors.New("ipam: missing")
	}
	conf := &Config{CNIVersion: in.CNIVersion, Name: in.Name, DataDir: in.IPAM.DataDir}
	if conf.DataDir == "" {
		conf.DataDir = defaultDataDir
	}
	// A relative dataDir would be resolved against whatever folder the
	// runtime happens to run the plugin in.
	if !filepath.IsAbs(conf.DataDir) {
		return nil, fmt.Errorf("ipam.dataDir: %q is not an absolute path", conf.DataDir)
	}
	return conf, nil
}

func buildConfig(in *netConf) (*Config, error) {
	conf, err := baseConfig(in)
	if err != nil {
		return nil, err
	}
	conf.ResolvConf = in.IPAM.ResolvConf
	conf.FailStatusWhenFull = in.IPAM.FailStatusWhenFull

	// Upstream's order: runtime ranges first, then the legacy single range,
	// then ipam.ranges. The position decides last_reserved_ip.<index>, so it
	// must match for a node switching suites to keep its round-robin state.
	for i, set := range in.RuntimeConfig.IPRanges {
		rs, err := parseRangeSet(fmt.Sprintf("runtimeConfig.ipRanges[%d]", i), set)
		if err != nil {
			return nil, err
		}
		conf.RangeSets = append(conf.RangeSets, rs)
	}
	// Upstream uses the legacy range only when it has a subnet, so configs
	// with ranges and a stray top-level gateway work there; they must here.
	legacy := in.IPAM.rangeIn
	if legacy.Subnet != "" {
		r, err := parseRange("ipam.", legacy)
		if err != nil {
			return nil, err
		}
		conf.RangeSets = append(conf.RangeSets, RangeSet{Key: "ipam.subnet", Ranges: []Range{r}})
	}
	for i, set := range in.IPAM.Ranges {
		rs, err := parseRangeSet(fmt.Sprintf("ipam.ranges[%d]", i), set)
		if err != nil {
			return nil, err
		}
		conf.RangeSets = append(conf.RangeSets, rs)
	}
	if len(conf.RangeSets) == 0 {
		if legacy != (rangeIn{}) {
			return nil, errors.New("ipam.subnet: missing (rangeStart, rangeEnd and gateway need it)")
		}
		return nil, errors.New("ipam.ranges: no range given (set ipam.ranges, ipam.subnet or runtimeConfig.ipRanges)")
	}
	if err := checkSetOverlap(conf.RangeSets); err != nil {
		return nil, err
	}
	for i, rt := range in.IPAM.Routes {
		route, err := parseRoute(fmt.Sprintf("ipam.routes[%d]", i), rt)
		if err != nil {
			return nil, err
		}
		conf.Routes = append(conf.Routes, route)
	}
	return conf, nil
}

// maxNameBytes is the longest file name Linux file systems take (NAME_MAX).
const maxNameBytes = 255

// validateNetworkName refuses a name that would not stay one folder below
// dataDir. skel checks this too, but the name builds a path here.
func validateNetworkName(name string) error {
	if name == "" {
		return errors.New("name: missing")
	}
	if name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") || strings.IndexFunc(name, isSpaceOrControl) >= 0 {
		return fmt.Errorf("name: %q cannot name a folder below dataDir", name)
	}
	if len(name) > maxNameBytes {
		return fmt.Errorf("name: %d bytes, longer than a folder name may be (%d)", len(name), maxNameBytes)
	}
	return nil
}

// validateAttachment refuses a container ID or interface name that could
// not be written into a reservation file unambiguously (its format is
// "<containerID>\r\n<ifname>"), or that could escape a folder.
func validateAttachment(containerID, ifName string) error {
	if containerID == "" {
		return result.InvalidEnv(errors.New("CNI_CONTAINERID: missing"))
	}
	if containerID == "." || containerID == ".." || strings.ContainsAny(containerID, "/\\\x00") || strings.IndexFunc(containerID, isSpaceOrControl) >= 0 {
		return result.InvalidEnv(fmt.Errorf("CNI_CONTAINERID: %q has characters a container ID cannot have", containerID))
	}
	if ifName == "" {
		return result.InvalidEnv(errors.New("CNI_IFNAME: missing"))
	}
	if ifName == "." || ifName == ".." || strings.ContainsAny(ifName, "/\\\x00") || strings.IndexFunc(ifName, isSpaceOrControl) >= 0 {
		return result.InvalidEnv(fmt.Errorf("CNI_IFNAME: %q has characters an interface name cannot have", ifName))
	}
	return nil
}

func isSpaceOrControl(r rune) bool {
	return r <= ' ' || r == 0x7f || r == 0x85 || r == 0xa0 || r == 0x2028 || r == 0x2029
}

func parseRoute(key string, in routeIn) (*types.Route, error) {
	if in.Dst == "" {
		return nil, fmt.Errorf("%s.dst: missing", key)
	}
	ip, dst, err := net.ParseCIDR(in.Dst)
	if err != nil {
		return nil, fmt.Errorf("%s.dst: %q is not a CIDR", key, in.Dst)
	}
	if ip4 := dst.IP.To4(); ip4 != nil && ip.To4() != nil {
		dst.IP = ip4
		if len(dst.Mask) == net.IPv6len {
			dst.Mask = dst.Mask[12:]
		}
	}
	route := &types.Route{Dst: *dst, MTU: in.MTU, AdvMSS: in.AdvMSS, Priority: in.Priority, Table: in.Table, Scope: in.Scope}
	if in.GW != "" {
		gw := net.ParseIP(in.GW)
		if gw == nil {
			return nil, fmt.Errorf("%s.gw: %q is not an IP address", key, in.GW)
		}
		if (gw.To4() != nil) != (dst.IP.To4() != nil) {
			return nil, fmt.Errorf("%s.gw: %s is not in the family of dst %s", key, in.GW, dst)
		}
		if gw4 := gw.To4(); gw4 != nil {
			gw = gw4
		}
		route.GW = gw
	}
	return route, nil
}
