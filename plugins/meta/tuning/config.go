package tuning

import (
	"fmt"
	"math"
	"net"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/result"
)

// DefaultDataDir is where the state files live unless dataDir says
// otherwise: upstream's folder, so either suite's DEL finds the other's.
const DefaultDataDir = "/run/cni/tuning"

// netConf is tuning's config. Keys and defaults are upstream's.
type netConf struct {
	attach.NetConf
	DataDir  string            `json:"dataDir,omitempty"`
	SysCtl   map[string]string `json:"sysctl"`
	Mac      string            `json:"mac,omitempty"`
	Promisc  bool              `json:"promisc,omitempty"`
	Mtu      int               `json:"mtu,omitempty"`
	TxQLen   *int              `json:"txQLen,omitempty"`
	Allmulti *bool             `json:"allmulti,omitempty"`

	RuntimeConfig struct {
		Mac string `json:"mac,omitempty"`
	} `json:"runtimeConfig,omitempty"`
	Args *struct {
		A *cniArgs `json:"cni"`
	} `json:"args"`

	// sysctls is SysCtl resolved: IFNAME replaced, in slashed form under
	// /proc/sys, sorted by key so that every run writes in the same order.
	sysctls []sysctl
	// mac is Mac parsed (nil: leave the MAC alone).
	mac net.HardwareAddr
}

// cniArgs are the keys "args": {"cni": {...}} may carry; each overrides
// the top-level key of the same name, as upstream lets it.
type cniArgs struct {
	SysCtl   *map[string]string `json:"sysctl"`
	Mac      *string            `json:"mac,omitempty"`
	Promisc  *bool              `json:"promisc,omitempty"`
	Mtu      *int               `json:"mtu"`
	Allmulti *bool              `json:"allmulti,omitempty"`
	TxQLen   *int               `json:"txQLen,omitempty"`
}

// macEnvArgs is CNI_ARGS: MAC=... sets the MAC (upstream's key).
type macEnvArgs struct {
	types.CommonArgs
	MAC types.UnmarshallableString `json:"mac,omitempty"`
}

// sysctl is one entry of "sysctl": the key as configured (what the
// allowlist matches), its path below /proc/sys, and the value.
type sysctl struct {
	Key   string
	Path  string // slashed, relative to /proc/sys: "net/ipv4/conf/eth0/arp_filter"
	Value string
}

// changesLink reports whether the config changes a link attribute (and so
// needs the link and a state file).
func (c *netConf) changesLink() bool {
	return c.mac != nil || c.Mtu != 0 || c.Promisc || c.Allmulti != nil || c.TxQLen != nil
}

// parseLenient is DEL's parse of a config that no longer validates: DEL
// restores what the state file under dataDir holds, so only dataDir must
// be usable.
func parseLenient(args *skel.CmdArgs) (*netConf, error) { return decodeDataDir(args.StdinData) }

// decodeDataDir decodes stdin and defaults and checks dataDir.
func decodeDataDir(stdin []byte) (*netConf, error) {
	c := &netConf{}
	if err := attach.Decode(stdin, c); err != nil {
		return nil, err
	}
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	// A relative dataDir would be resolved against whatever folder the
	// runtime happens to run the plugin in.
	if !filepath.IsAbs(c.DataDir) {
		return nil, result.InvalidConfig(fmt.Errorf("dataDir: %q is not an absolute path", c.DataDir))
	}
	return c, nil
}

func parse(args *skel.CmdArgs) (*netConf, error) {
	return parseConfig(args.StdinData, args.Args, args.IfName)
}

// parseConfig decodes, merges (top-level keys < CNI_ARGS MAC <
// runtimeConfig.mac < args.cni), defaults and validates stdin, the same way
// for every command. It touches no kernel state and no file; the
// allowlist, a file, is read by ADD before any change.
func parseConfig(stdin []byte, envArgs, ifName string) (*netConf, error) {
	c, err := decodeDataDir(stdin)
	if err != nil {
		return nil, err
	}
	if envArgs != "" {
		e := macEnvArgs{}
		if err := types.LoadArgs(envArgs, &e); err != nil {
			return nil, result.InvalidConfig(fmt.Errorf("CNI_ARGS %q: %w", envArgs, err))
		}
		if e.MAC != "" {
			c.Mac = string(e.MAC)
		}
	}
	if c.RuntimeConfig.Mac != "" {
		c.Mac = c.RuntimeConfig.Mac
	}
	if c.Args != nil && c.Args.A != nil {
		a := c.Args.A
		if a.SysCtl != nil {
			if c.SysCtl == nil {
				c.SysCtl = map[string]string{}
			}
			for k, v := range *a.SysCtl {
				c.SysCtl[k] = v
			}
		}
		if a.Mac != nil {
			c.Mac = *a.Mac
		}
		if a.Promisc != nil {
			c.Promisc = *a.Promisc
		}
		if a.Mtu != nil {
			c.Mtu = *a.Mtu
		}
		if a.Allmulti != nil {
			c.Allmulti = a.Allmulti
		}
		if a.TxQLen != nil {
			c.TxQLen = a.TxQLen
		}
	}
	if c.Mac != "" {
		mac, err := net.ParseMAC(c.Mac)
		if err != nil {
			return nil, result.InvalidConfig(fmt.Errorf("mac: %q is not a MAC address: %w", c.Mac, err))
		}
		c.mac = mac
	}
	if c.Mtu < 0 {
		return nil, result.InvalidConfig(fmt.Errorf("mtu: %d is negative", c.Mtu))
	}
	if err := attach.ValidateMTU(c.Mtu); err != nil {
		return nil, err
	}
	if c.TxQLen != nil && (*c.TxQLen < 0 || int64(*c.TxQLen) > math.MaxUint32) {
		return nil, result.InvalidConfig(fmt.Errorf("txQLen: %d out of range 0-%d", *c.TxQLen, uint32(math.MaxUint32)))
	}
	keys := make([]string, 0, len(c.SysCtl))
	for k := range c.SysCtl {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p, err := sysctlPath(k, ifName)
		if err != nil {
			return nil, result.InvalidConfig(err)
		}
		v := c.SysCtl[k]
		if strings.ContainsAny(v, "\n\x00") {
			return nil, result.InvalidConfig(fmt.Errorf("sysctl: value %q of %q holds a newline or NUL", v, k))
		}
		c.sysctls = append(c.sysctls, sysctl{Key: k, Path: p, Value: v})
	}
	return c, nil
}

// sysctlPath resolves a sysctl key to its path below /proc/sys: dotted
// ("net.ipv4.conf.eth0.arp_filter") or slashed
// ("net/ipv4/conf/eth0.100/arp_filter"), told apart by the first separator
// as sysctl(8) does; IFNAME, in either form, becomes ifName. It refuses a
// key that leaves /proc/sys/net. Without an ifName (GC and STATUS have
// no CNI_IFNAME) IFNAME stays: the key's shape is checked all the same.
func sysctlPath(key, ifName string) (string, error) {
	p := normalizeSysctl(key)
	if ifName != "" {
		p = strings.ReplaceAll(p, "IFNAME", ifName)
	}
	clean := path.Clean("/" + p)
	if !strings.HasPrefix(clean, "/net/") || p != clean[1:] {
		return "", fmt.Errorf("sysctl: key %q (%s) is not a sysctl under /proc/sys/net/", key, path.Join("/proc/sys", p))
	}
	return p, nil
}

// normalizeSysctl returns name in slashed form. With dots as separators
// (the first separator is a dot), dots and slashes swap, so that a slash
// stands for a dot inside a component (an interface "eth0.100"); with
// slashes, the name is left alone.
func normalizeSysctl(name string) string {
	if i := strings.IndexAny(name, "./"); i >= 0 && name[i] == '.' {
		return strings.NewReplacer(".", "/", "/", ".").Replace(name)
	}
	return name
}
