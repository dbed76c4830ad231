package dhcp

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/cniforge/plugins/pkg/result"
)

// DefaultSocketPath is where the plugin finds the daemon, as upstream.
const DefaultSocketPath = "/run/cni/dhcp.sock"

// Config is a validated dhcp IPAM configuration. The plugin and the daemon
// parse the same stdin with parseConfig, so both refuse the same input.
type Config struct {
	CNIVersion string
	Name       string // network name: part of the client ID
	SocketPath string
	// Request are the options asked for on top of (or, with skipDefault,
	// instead of) defaultRequested.
	Request []uint8
	// Provide are the options sent to the server.
	Provide []Provide
	// Priority is the metric of every route the lease installs (0: none).
	Priority int
	// IPv4 and IPv6 say which protocols run: DHCPv4 (the default, as
	// upstream) and DHCPv6 IA_NA ("ipFamilies": ["ipv6"]).
	IPv4, IPv6 bool
}

// Provide is one option the client sends: a fixed Value, or the CNI_ARGS
// value named by FromArg.
type Provide struct {
	Option  uint8
	Value   string
	FromArg string
}

// defaultRequested are the options upstream always asks for: subnet mask,
// router, static routes and classless static routes.
var defaultRequested = []uint8{1, 3, 33, 121}

// optionNames are the names upstream's daemon accepts besides numbers;
// built on first use, not at init (the multicall binary runs every
// plugin's init in every exec).
var optionNames = sync.OnceValue(func() map[string]uint8 {
	return map[string]uint8{
		"subnet-mask":             1,
		"dhcp-client-identifier":  61,
		"router":                  3,
		"routers":                 3,
		"domain-name-servers":     6,
		"host-name":               12,
		"hostname":                12,
		"domain-name":             15,
		"interface-mtu":           26,
		"broadcast-address":       28,
		"static-routes":           33,
		"ntp-servers":             42,
		"dhcp-lease-time":         51,
		"vendor-class-identifier": 60,
		"user-class":              77,
		"domain-search":           119,
		"classless-static-route":  121,
		"classless-static-routes": 121,
	}
})

// reservedOptions are the options the client itself manages; providing
// them would corrupt the exchange.
var reservedOptions = sync.OnceValue(func() map[uint8]string {
	return map[uint8]string{
		0: "pad", 50: "requested address", 51: "lease time", 53: "message type",
		54: "server identifier", 55: "parameter request list", 255: "end",
	}
})

type netConf struct {
	CNIVersion string  `json:"cniVersion"`
	Name       string  `json:"name"`
	IPAM       *ipamIn `json:"ipam"`
}

type ipamIn struct {
	Type             string      `json:"type"`
	DaemonSocketPath string      `json:"daemonSocketPath"`
	Request          []requestIn `json:"request"`
	Provide          []provideIn `json:"provide"`
	Priority         int         `json:"priority"`
	IPFamilies       []string    `json:"ipFamilies"`
}

type requestIn struct {
	SkipDefault bool   `json:"skipDefault"`
	Option      string `json:"option"`
}

type provideIn struct {
	Option  string `json:"option"`
	Value   string `json:"value"`
	FromArg string `json:"fromArg"`
}

// parseConfig decodes, defaults and validates stdin. It is pure. Errors
// carry their CNI code (6 malformed JSON, 7 invalid config) and name the key.
func parseConfig(stdin []byte) (*Config, error) {
	var in netConf
	if err := result.DecodeConfig(stdin, &in); err != nil {
		return nil, err
	}
	conf, err := buildConfig(&in)
	if err != nil {
		return nil, result.InvalidConfig(err)
	}
	return conf, nil
}

// parseReleaseConfig is parseConfig for DEL: a config edited since ADD
// whose options or families no longer validate must still release the
// lease, which needs only the network's name (part of the client ID) and
// the daemon's socket. Other values are checked only when it all parses.
func parseReleaseConfig(stdin []byte) (*Config, error) {
	conf, err := parseConfig(stdin)
	if result.Code(err) != types.ErrInvalidNetworkConfig {
		return conf, err
	}
	var in netConf
	if derr := result.DecodeConfig(stdin, &in); derr != nil {
		return nil, derr
	}
	if in.Name == "" || in.IPAM == nil {
		return nil, err
	}
	conf = &Config{CNIVersion: in.CNIVersion, Name: in.Name, SocketPath: in.IPAM.DaemonSocketPath}
	if conf.SocketPath == "" {
		conf.SocketPath = DefaultSocketPath
	}
	if !strings.HasPrefix(conf.SocketPath, "/") {
		return nil, err
	}
	return conf, nil
}

func buildConfig(in *netConf) (*Config, error) {
	if in.Name == "" {
		return nil, errors.New("name: missing")
	}
	if in.IPAM == nil {
		return nil, errors.New("ipam: missing")
	}
	conf := &Config{
		CNIVersion: in.CNIVersion,
		Name:       in.Name,
		SocketPath: in.IPAM.DaemonSocketPath,
		Priority:   in.IPAM.Priority,
	}
	if conf.SocketPath == "" {
		conf.SocketPath = DefaultSocketPath
	}
	if !strings.HasPrefix(conf.SocketPath, "/") {
		return nil, fmt.Errorf("ipam.daemonSocketPath: %q is not an absolute path", conf.SocketPath)
	}
	if conf.Priority < 0 || int64(conf.Priority) > math.MaxUint32 {
		// The kernel keeps a route's metric in 32 bits.
		return nil, fmt.Errorf("ipam.priority: %d out of range 0-%d", conf.Priority, uint32(math.MaxUint32))
	}

	skipDefault := false
	for i, r := range in.IPAM.Request {
		if r.SkipDefault {
			skipDefault = true
		}
		if r.Option == "" {
			continue // as upstream: {"skipDefault": true} alone only drops the defaults
		}
		code, err := parseOption(r.Option)
		if err != nil {
			return nil, fmt.Errorf("ipam.request[%d].option: %w", i, err)
		}
		conf.Request = appendOnce(conf.Request, code)
	}
	if !skipDefault {
		req := append([]uint8(nil), defaultRequested...)
		for _, c := range conf.Request {
			req = appendOnce(req, c)
		}
		conf.Request = req
	}

	for i, p := range in.IPAM.Provide {
		code, err := parseOption(p.Option)
		if err != nil {
			return nil, fmt.Errorf("ipam.provide[%d].option: %w", i, err)
		}
		if what, ok := reservedOptions()[code]; ok {
			return nil, fmt.Errorf("ipam.provide[%d].option: %d (%s) is set by the daemon itself", i, code, what)
		}
		if len(p.Value) > 255 {
			return nil, fmt.Errorf("ipam.provide[%d].value: %d bytes, at most 255 fit an option", i, len(p.Value))
		}
		if p.Value == "" && p.FromArg == "" {
			continue // as upstream: nothing to send
		}
		conf.Provide = append(conf.Provide, Provide{Option: code, Value: p.Value, FromArg: p.FromArg})
	}

	if len(in.IPAM.IPFamilies) == 0 {
		conf.IPv4 = true
	}
	for i, f := range in.IPAM.IPFamilies {
		switch strings.ToLower(f) {
		case "ipv4", "4":
			conf.IPv4 = true
		case "ipv6", "6":
			conf.IPv6 = true
		default:
			return nil, fmt.Errorf("ipam.ipFamilies[%d]: %q is neither \"ipv4\" nor \"ipv6\"", i, f)
		}
	}
	return conf, nil
}

// parseOption reads an option as upstream writes it: a number ("121") or
// a name ("classless-static-route").
func parseOption(s string) (uint8, error) {
	if s == "" {
		return 0, errors.New("missing")
	}
	if n, err := strconv.Atoi(s); err == nil {
		if n < 1 || n > 254 {
			return 0, fmt.Errorf("%q out of range 1-254", s)
		}
		return uint8(n), nil
	}
	if c, ok := optionNames()[strings.ToLower(s)]; ok {
		return c, nil
	}
	return 0, fmt.Errorf("%q is not an option number or a known name", s)
}

func appendOnce(list []uint8, c uint8) []uint8 {
	for _, x := range list {
		if x == c {
			return list
		}
	}
	return append(list, c)
}

// providedValues resolves conf.Provide against CNI_ARGS ("K=V;K=V"). An
// argument that fromArg names but CNI_ARGS lacks is skipped, as upstream
// does: a runtime that sets no K8S_POD_NAME still gets an address.
func providedValues(conf *Config, cniArgs string) map[uint8]string {
	args := map[string]string{}
	for _, kv := range strings.Split(cniArgs, ";") {
		k, v, ok := strings.Cut(kv, "=")
		if ok && k != "" {
			args[k] = v
		}
	}
	out := map[uint8]string{}
	for _, p := range conf.Provide {
		if v, ok := args[p.FromArg]; ok && p.FromArg != "" && v != "" {
			out[p.Option] = v // CNI_ARGS' value first, as upstream sends it last
		} else if p.Value != "" {
			out[p.Option] = p.Value
		}
	}
	return out
}

// clientID is upstream's client identifier for an attachment.
func clientID(containerID, network, ifName string) string {
	return containerID + "/" + network + "/" + ifName
}
