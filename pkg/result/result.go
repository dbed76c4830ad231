package result

import (
	"encoding/json"
	"fmt"
	"io"
	"net"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
)

// Print writes res to stdout converted to cniVersion, the version the
// runtime asked for in the config.
func Print(res types.Result, cniVersion string) error {
	return types.PrintResult(res, cniVersion)
}

// Fprint writes res to w converted to cniVersion, exactly as Print writes
// it to stdout.
func Fprint(w io.Writer, res types.Result, cniVersion string) error {
	conv, err := res.GetAsVersion(cniVersion)
	if err != nil {
		return err
	}
	return conv.PrintTo(w)
}

// Current converts any result to the current (1.x) result type.
func Current(res types.Result) (*current.Result, error) {
	if res == nil {
		return nil, nil
	}
	r, err := current.NewResultFromResult(res)
	if err != nil {
		return nil, fmt.Errorf("convert %s result: %w", res.Version(), err)
	}
	return r, nil
}

// PrevResult parses the prevResult carried in a plugin's stdin config and
// returns it as a current result, or nil when there is none.
func PrevResult(stdin []byte) (*current.Result, error) {
	var conf types.NetConf
	if err := json.Unmarshal(stdin, &conf); err != nil {
		return nil, Decoding(fmt.Errorf("parse config: %w", err))
	}
	return ParsePrev(&conf)
}

// ParsePrev parses conf's raw prevResult (filling conf.PrevResult) and
// returns it as a current result, or nil when there is none. Errors carry
// CNI code 6 when it does not decode.
//
// A prevResult whose cniVersion is not the config's is refused (code 1):
// the runtime passes the previous plugin's result in the config's version
// (libcni converts it), so another version means a runtime or conflist
// that mixes versions; upstream parses it as the config's version whatever
// it says. Null entries and an "interface" index outside "interfaces" are
// refused too (code 7), before a plugin follows them.
func ParsePrev(conf *types.NetConf) (*current.Result, error) {
	if conf.RawPrevResult == nil {
		return nil, nil
	}
	if v, ok := conf.RawPrevResult["cniVersion"].(string); ok && v != "" {
		confVer := conf.CNIVersion
		if confVer == "" {
			confVer = "0.1.0" // the spec's default
		}
		if v != confVer {
			return nil, types.NewError(types.ErrIncompatibleCNIVersion,
				fmt.Sprintf("prevResult: cniVersion %q is not the config's cniVersion %q", v, confVer), "")
		}
	}
	if err := version.ParsePrevResult(conf); err != nil {
		return nil, Decoding(fmt.Errorf("prevResult: %w", err))
	}
	prev, err := Current(conf.PrevResult)
	if err != nil {
		return nil, Decoding(fmt.Errorf("prevResult: %w", err))
	}
	if err := validatePrev(prev); err != nil {
		return nil, InvalidConfig(err)
	}
	return prev, nil
}

// validatePrev refuses what a plugin would dereference or index blindly,
// and an address or route without its address or destination: the library
// decodes a missing one as the zero IPNet, which a chained plugin would
// print as "<nil>" in its own result, and the next plugin could not parse
// that (found by FuzzPrevResult).
func validatePrev(r *current.Result) error {
	for i, iface := range r.Interfaces {
		if iface == nil {
			return fmt.Errorf("prevResult.interfaces[%d]: null", i)
		}
	}
	for i, ipc := range r.IPs {
		if ipc == nil {
			return fmt.Errorf("prevResult.ips[%d]: null", i)
		}
		if ipc.Address.IP == nil || ipc.Address.Mask == nil {
			return fmt.Errorf("prevResult.ips[%d].address: missing", i)
		}
		if ipc.Interface != nil && (*ipc.Interface < 0 || *ipc.Interface >= len(r.Interfaces)) {
			return fmt.Errorf("prevResult.ips[%d].interface: %d is not an index of prevResult.interfaces (%d entries)", i, *ipc.Interface, len(r.Interfaces))
		}
	}
	for i, rt := range r.Routes {
		if rt == nil {
			return fmt.Errorf("prevResult.routes[%d]: null", i)
		}
		if rt.Dst.IP == nil || rt.Dst.Mask == nil {
			return fmt.Errorf("prevResult.routes[%d].dst: missing", i)
		}
	}
	return nil
}

// InterfaceIndex returns the index in res.Interfaces of the interface named
// ifName in the sandbox sandbox ("" matches a host interface), or -1.
func InterfaceIndex(res *current.Result, ifName, sandbox string) int {
	for i, iface := range res.Interfaces {
		if iface.Name == ifName && iface.Sandbox == sandbox {
			return i
		}
	}
	return -1
}

// IPsOf returns the addresses in res that point at interface index idx.
func IPsOf(res *current.Result, idx int) []*current.IPConfig {
	var out []*current.IPConfig
	for _, ipc := range res.IPs {
		if ipc.Interface != nil && *ipc.Interface == idx {
			out = append(out, ipc)
		}
	}
	return out
}

// CheckAddrs reports the first expected address missing from have: each
// expected address must be present with the same prefix length.
func CheckAddrs(ifName string, want []*current.IPConfig, have []net.IPNet) error {
	for _, w := range want {
		found := false
		for _, h := range have {
			if h.IP.Equal(w.Address.IP) && maskEqual(h.Mask, w.Address.Mask) {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("%q lacks address %s", ifName, w.Address.String())
		}
	}
	return nil
}

// Route is a kernel route reduced to what a CNI result can express.
type Route struct {
	Dst net.IPNet
	GW  net.IP
}

// CheckRoutes reports the first expected route missing from have. A route
// whose gateway is unset in want matches any gateway.
func CheckRoutes(ifName string, want []*types.Route, have []Route) error {
	for _, w := range want {
		found := false
		for _, h := range have {
			if !h.Dst.IP.Equal(w.Dst.IP) || !maskEqual(h.Dst.Mask, w.Dst.Mask) {
				continue
			}
			if w.GW != nil && !w.GW.Equal(h.GW) {
				continue
			}
			found = true
			break
		}
		if !found {
			return fmt.Errorf("%q lacks route %s", ifName, routeString(w))
		}
	}
	return nil
}

func routeString(r *types.Route) string {
	if r.GW == nil {
		return r.Dst.String()
	}
	return fmt.Sprintf("%s via %s", r.Dst.String(), r.GW)
}

func maskEqual(a, b net.IPMask) bool {
	ao, ab := a.Size()
	bo, bb := b.Size()
	return ao == bo && ab == bb
}
