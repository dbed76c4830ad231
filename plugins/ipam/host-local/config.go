package hostlocal

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

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

type routeIn struct {
	Dst string `json:"dst"`
	GW  string `json:"gw"`
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
	if err := validateNetworkName(in.Name); err != nil {
		return nil, result.InvalidConfig(err)
	}
	if in.IPAM == nil {
		return nil, result.InvalidConfig(errors.New("ipam: missing"))
	}
	conf := &Config{CNIVersion: in.CNIVersion, Name: in.Name, DataDir: in.IPAM.DataDir}
	if conf.DataDir == "" {
		conf.DataDir = defaultDataDir
	}
	if !filepath.IsAbs(conf.DataDir) {
		return nil, result.InvalidConfig(fmt.Errorf("ipam.dataDir: %q is not an absolute path", conf.DataDir))
	}
	return conf, nil
}

func buildConfig(in *netConf) (*Config, error) {
	if err := validateNetworkName(in.Name); err != nil {
		return nil, err
	}
	if in.IPAM == nil {
		return nil, errors.New("ipam: missing")
	}
	conf := &Config{
		CNIVersion: in.CNIVersion,
		Name:       in.Name,
		DataDir:    in.IPAM.DataDir,
		ResolvConf: in.IPAM.ResolvConf,

		FailStatusWhenFull: in.IPAM.FailStatusWhenFull,
	}
	if conf.DataDir == "" {
		conf.DataDir = defaultDataDir
	}
	// A relative dataDir would be resolved against whatever folder the
	// runtime happens to run the plugin in.
	if !filepath.IsAbs(conf.DataDir) {
		return nil, fmt.Errorf("ipam.dataDir: %q is not an absolute path", conf.DataDir)
	}

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

func parseRangeSet(key string, set []rangeIn) (RangeSet, error) {
	if len(set) == 0 {
		return RangeSet{}, fmt.Errorf("%s: empty range set", key)
	}
	rs := RangeSet{Key: key}
	for j, in := range set {
		r, err := parseRange(fmt.Sprintf("%s[%d].", key, j), in)
		if err != nil {
			return RangeSet{}, err
		}
		if j > 0 && r.Subnet.Addr().Is4() != rs.Ranges[0].Subnet.Addr().Is4() {
			return RangeSet{}, fmt.Errorf("%s[%d].subnet: %s mixes address families with %s in one range set",
				key, j, r.Subnet, rs.Ranges[0].Subnet)
		}
		for k, prev := range rs.Ranges {
			if r.overlaps(prev) {
				return RangeSet{}, fmt.Errorf("%s[%d]: range %s overlaps %s[%d] range %s", key, j, r, key, k, prev)
			}
		}
		rs.Ranges = append(rs.Ranges, r)
	}
	return rs, nil
}

// parseRange validates one range; prefix is the key up to and including the
// dot ("ipam." or "ipam.ranges[0][1].").
func parseRange(prefix string, in rangeIn) (Range, error) {
	var r Range
	if in.Subnet == "" {
		return r, fmt.Errorf("%ssubnet: missing", prefix)
	}
	p, err := netip.ParsePrefix(in.Subnet)
	if err != nil {
		return r, fmt.Errorf("%ssubnet: %q is not a CIDR", prefix, in.Subnet)
	}
	if p.Addr().Is4In6() {
		if p.Bits() < 96 {
			return r, fmt.Errorf("%ssubnet: %q mixes IPv4-mapped and IPv6 addresses", prefix, in.Subnet)
		}
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96) // ::ffff:10.0.0.0/120 is 10.0.0.0/24
	}
	if p.Masked() != p {
		return r, fmt.Errorf("%ssubnet: %s has host bits set (the network is %s)", prefix, in.Subnet, p.Masked())
	}
	if p.Bits() > p.Addr().BitLen()-2 {
		return r, fmt.Errorf("%ssubnet: %s is too small to allocate from (at most /%d)", prefix, p, p.Addr().BitLen()-2)
	}
	r.Subnet = p
	network := p.Addr()
	last := lastAddr(p)
	firstHost := network.Next()
	lastHost := last
	if network.Is4() {
		lastHost = last.Prev() // the broadcast address is never a host's
	}

	parse := func(key, s string, def netip.Addr) (netip.Addr, error) {
		if s == "" {
			return def, nil
		}
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Addr{}, fmt.Errorf("%s%s: %q is not an IP address", prefix, key, s)
		}
		a = a.Unmap()
		if !p.Contains(a) {
			return netip.Addr{}, fmt.Errorf("%s%s: %s not in subnet %s", prefix, key, a, p)
		}
		if a == network {
			return netip.Addr{}, fmt.Errorf("%s%s: %s is the network address of %s", prefix, key, a, p)
		}
		if network.Is4() && a == last {
			return netip.Addr{}, fmt.Errorf("%s%s: %s is the broadcast address of %s", prefix, key, a, p)
		}
		return a, nil
	}
	if r.Start, err = parse("rangeStart", in.RangeStart, firstHost); err != nil {
		return r, err
	}
	if r.End, err = parse("rangeEnd", in.RangeEnd, lastHost); err != nil {
		return r, err
	}
	if r.Gateway, err = parse("gateway", in.Gateway, firstHost); err != nil {
		return r, err
	}
	if r.Start.Compare(r.End) > 0 {
		return r, fmt.Errorf("%srangeEnd: %s is before rangeStart %s", prefix, r.End, r.Start)
	}
	if r.Start == r.End && r.Start == r.Gateway {
		return r, fmt.Errorf("%srangeStart: range %s holds only the gateway", prefix, r)
	}
	return r, nil
}

// checkSetOverlap refuses two range sets that could hand out the same
// address: each would believe it owns it.
func checkSetOverlap(sets []RangeSet) error {
	for i := range sets {
		for j := 0; j < i; j++ {
			for _, a := range sets[i].Ranges {
				for _, b := range sets[j].Ranges {
					if a.overlaps(b) {
						return fmt.Errorf("%s: range %s overlaps range %s of %s", sets[i].Key, a, b, sets[j].Key)
					}
				}
			}
		}
	}
	return nil
}

// checkOldResultFits refuses configs whose addresses a 0.1.0/0.2.0 result
// cannot carry: those results hold one IPv4 and one IPv6 address, and the
// cni library drops the rest silently, which would reserve addresses the
// runtime never learns about.
func checkOldResultFits(cniVersion string, sets []RangeSet) error {
	if cniVersion == "" {
		return nil
	}
	if ok, err := version.GreaterThanOrEqualTo(cniVersion, "0.3.0"); err != nil || ok {
		return nil // an unparsable version is skel's to refuse
	}
	var v4, v6 int
	for _, s := range sets {
		if s.Ranges[0].Subnet.Addr().Is4() {
			v4++
		} else {
			v6++
		}
	}
	if v4 > 1 || v6 > 1 {
		return fmt.Errorf("ipam.ranges: cniVersion %s results hold one IPv4 and one IPv6 address, but %d IPv4 and %d IPv6 range sets are configured",
			cniVersion, v4, v6)
	}
	return nil
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
	route := &types.Route{Dst: *dst}
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

// assignRequested picks the requested addresses from the first non-empty
// source, in the order CONVENTIONS.md gives (runtimeConfig.ips, then
// args.cni.ips, then CNI_ARGS IP: "when args has the key, CNI_ARGS must be
// ignored"), and maps each to the one range set holding it.
func (c *Config) assignRequested(in *netConf, cniArgs string) error {
	var (
		key  string
		list []string
	)
	switch {
	case len(in.RuntimeConfig.IPs) > 0:
		key, list = "runtimeConfig.ips", in.RuntimeConfig.IPs
	case in.Args != nil && in.Args.CNI != nil && len(in.Args.CNI.IPs) > 0:
		key, list = "args.cni.ips", in.Args.CNI.IPs
	default:
		ips, err := cniArgsIPs(cniArgs)
		if err != nil {
			return err
		}
		key, list = "CNI_ARGS IP", ips
	}
	for i, s := range list {
		itemKey := fmt.Sprintf("%s[%d]", key, i)
		a, err := parseIPOrCIDR(s)
		if err != nil {
			return fmt.Errorf("%s: %q is not an IP address", itemKey, s)
		}
		set := c.rangeSetFor(a)
		if set < 0 {
			return fmt.Errorf("%s: %s not in any range set (%s)", itemKey, a, c.describeSets())
		}
		if prev, taken := c.Requested[set]; taken {
			return fmt.Errorf("%s: %s and %s are both in range set %s; one address per range set", itemKey, prev, a, c.RangeSets[set])
		}
		for _, r := range c.RangeSets[set].Ranges {
			if r.Gateway == a {
				return fmt.Errorf("%s: %s is the gateway of range set %s", itemKey, a, c.RangeSets[set])
			}
		}
		if c.Requested == nil {
			c.Requested = map[int]netip.Addr{}
		}
		c.Requested[set] = a
	}
	return nil
}

// cniArgsIPs reads IP=<ip>[,<ip>...] from CNI_ARGS. Other keys belong to
// other plugins and are ignored, as runtimes pass K8S_POD_NAME and the like.
func cniArgsIPs(cniArgs string) ([]string, error) {
	for _, pair := range strings.Split(cniArgs, ";") {
		if pair == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			return nil, result.InvalidEnv(fmt.Errorf("CNI_ARGS: %q is not KEY=VALUE", pair))
		}
		if k != "IP" {
			continue
		}
		var out []string
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		return out, nil
	}
	return nil, nil
}

// parseIPOrCIDR accepts "10.1.0.5" and "10.1.0.5/24". The prefix length is
// ignored, as upstream does: the result carries the range's subnet.
func parseIPOrCIDR(s string) (netip.Addr, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Addr{}, err
		}
		return p.Addr().Unmap(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, errors.New("not an IP address")
	}
	return a.Unmap(), nil
}

// rangeSetFor returns the index of the range set holding a, or -1.
func (c *Config) rangeSetFor(a netip.Addr) int {
	for i, s := range c.RangeSets {
		if s.contains(a) {
			return i
		}
	}
	return -1
}

func (c *Config) describeSets() string {
	var b bytes.Buffer
	for i, s := range c.RangeSets {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(s.String())
	}
	return b.String()
}
