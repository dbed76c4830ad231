package static

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/cniforge/plugins/pkg/result"
)

// rawConf is the part of the network config static reads, as written.
type rawConf struct {
	CNIVersion    string   `json:"cniVersion"`
	Name          string   `json:"name"`
	IPAM          *rawIPAM `json:"ipam"`
	RuntimeConfig struct {
		IPs []string `json:"ips"` // capability "ips"
	} `json:"runtimeConfig"`
	Args struct {
		CNI struct {
			IPs []string `json:"ips"` // CONVENTIONS.md args.cni.ips
		} `json:"cni"`
	} `json:"args"`
}

type rawIPAM struct {
	Type      string            `json:"type"`
	Addresses []rawAddress      `json:"addresses"`
	Routes    []json.RawMessage `json:"routes"`
	DNS       types.DNS         `json:"dns"`
}

type rawAddress struct {
	Address string `json:"address"`
	Gateway string `json:"gateway"`
}

// netConf is the validated config: the addresses this call hands out (after
// the per-call sources are applied), routes and DNS.
type netConf struct {
	cniVersion string
	name       string
	addresses  []address
	routes     []*types.Route
	dns        types.DNS
	prevResult *current.Result
	// unusedGateways are CNI_ARGS GATEWAY values in the subnet of no
	// address, dropped (ADD warns).
	unusedGateways []string
}

// address is one address static hands out. key names where it came from
// (`ipam.addresses[0]`, `runtimeConfig.ips[1]`, ...) for error messages.
type address struct {
	key     string
	net     net.IPNet // the address itself with its subnet's mask
	gateway net.IP    // nil when none was given
}

func (a address) is4() bool { return a.net.IP.To4() != nil }

// parseConfig decodes and validates stdin and CNI_ARGS. It is pure: ADD and
// CHECK call it first (DEL, GC and STATUS call decodeOnly).
//
// Addresses come from the first of these that is set, as upstream static
// does: runtimeConfig.ips (capability "ips"), then args.cni.ips, then
// ipam.addresses plus CNI_ARGS IP. The first two replace ipam.addresses; the
// legacy CNI_ARGS IP adds to them and CNI_ARGS GATEWAY sets the gateway of
// every address whose subnet holds it. Per CONVENTIONS.md, CNI_ARGS IP and
// GATEWAY are ignored when args.cni.ips (or runtimeConfig.ips) is given.
func parseConfig(stdin []byte, cniArgs string) (*netConf, error) {
	var raw rawConf
	if err := result.DecodeConfig(stdin, &raw); err != nil {
		return nil, err
	}
	if raw.CNIVersion == "" {
		raw.CNIVersion = "0.1.0" // the spec's reading of a config without cniVersion
	}
	conf := &netConf{cniVersion: raw.CNIVersion, name: raw.Name}
	if err := conf.validate(&raw, cniArgs); err != nil {
		return nil, result.InvalidConfig(err)
	}
	prev, err := result.PrevResult(stdin)
	if err != nil {
		return nil, err
	}
	conf.prevResult = prev
	return conf, nil
}

// decodeOnly is all DEL, GC and STATUS parse: the config must be a JSON
// object (code 6 otherwise), nothing more. static keeps no state, so they
// have nothing to do with its values, and refusing a per-call input (an
// unknown CNI_ARGS key, a bad runtimeConfig.ips) or a value that changed
// since ADD (a route dst with host bits) would only block a pod's teardown;
// ADD and CHECK report those.
func decodeOnly(stdin []byte) error {
	var obj map[string]json.RawMessage
	return result.DecodeConfig(stdin, &obj)
}

func (conf *netConf) validate(raw *rawConf, cniArgs string) error {
	if raw.Name == "" {
		return errors.New("name: missing")
	}
	if raw.IPAM == nil {
		return errors.New("ipam: missing")
	}
	env, err := parseCNIArgs(cniArgs)
	if err != nil {
		return err
	}

	switch {
	case len(raw.RuntimeConfig.IPs) > 0:
		conf.addresses, err = parseIPList("runtimeConfig.ips", raw.RuntimeConfig.IPs)
	case len(raw.Args.CNI.IPs) > 0:
		conf.addresses, err = parseIPList("args.cni.ips", raw.Args.CNI.IPs)
	default:
		conf.addresses, err = parseAddresses(raw.IPAM.Addresses)
		if err == nil {
			conf.addresses, conf.unusedGateways, err = applyCNIArgs(conf.addresses, env)
		}
	}
	if err != nil {
		return err
	}
	if err := checkAddresses(conf.addresses, raw.CNIVersion); err != nil {
		return err
	}

	if conf.routes, err = parseRoutes(raw.IPAM.Routes); err != nil {
		return err
	}
	if err := checkDNS(raw.IPAM.DNS); err != nil {
		return err
	}
	conf.dns = raw.IPAM.DNS
	return nil
}

func parseAddresses(raws []rawAddress) ([]address, error) {
	out := make([]address, 0, len(raws))
	for i, r := range raws {
		key := fmt.Sprintf("ipam.addresses[%d]", i)
		a, err := parseCIDR(key+".address", r.Address)
		if err != nil {
			return nil, err
		}
		a.key = key
		if r.Gateway != "" {
			gw, err := netip.ParseAddr(r.Gateway)
			if err != nil || gw.Zone() != "" {
				return nil, fmt.Errorf("%s.gateway: %q is not an IP address", key, r.Gateway)
			}
			a.gateway = net.IP(gw.AsSlice())
		}
		out = append(out, a)
	}
	return out, nil
}

// parseIPList reads a per-call list of addresses (runtimeConfig.ips,
// args.cni.ips): CIDR strings without gateways.
func parseIPList(key string, ips []string) ([]address, error) {
	out := make([]address, 0, len(ips))
	for i, s := range ips {
		k := fmt.Sprintf("%s[%d]", key, i)
		a, err := parseCIDR(k, s)
		if err != nil {
			return nil, err
		}
		a.key = k
		out = append(out, a)
	}
	return out, nil
}

// parseCIDR reads an address with its prefix length, "10.1.0.5/24": static
// cannot guess the subnet, so a bare address is refused.
func parseCIDR(key, s string) (address, error) {
	if s == "" {
		return address{}, fmt.Errorf("%s: missing", key)
	}
	if !strings.Contains(s, "/") {
		if _, err := netip.ParseAddr(s); err == nil {
			return address{}, fmt.Errorf("%s: %q has no prefix length (write it as %s/<prefix>)", key, s, s)
		}
		return address{}, fmt.Errorf("%s: %q is not an address in CIDR notation", key, s)
	}
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil {
		return address{}, fmt.Errorf("%s: %q is not an address in CIDR notation", key, s)
	}
	addr := p.Addr()
	return address{net: net.IPNet{
		IP:   net.IP(addr.AsSlice()),
		Mask: net.CIDRMask(p.Bits(), addr.BitLen()),
	}}, nil
}

// checkAddresses refuses what no runtime could apply: a gateway of the other
// family, the same address twice, and more than one address per family in a
// 0.1.0/0.2.0 result (which holds one IPv4 and one IPv6 address).
func checkAddresses(addrs []address, cniVersion string) error {
	var n4, n6 int
	for i, a := range addrs {
		if a.gateway != nil && (a.gateway.To4() != nil) != a.is4() {
			return fmt.Errorf("%s.gateway: %s is not of the same IP family as %s", a.key, a.gateway, a.net.String())
		}
		for _, b := range addrs[:i] {
			if a.net.IP.Equal(b.net.IP) {
				return fmt.Errorf("%s: %s is already given by %s", a.key, a.net.IP, b.key)
			}
		}
		if a.is4() {
			n4++
		} else {
			n6++
		}
	}
	if multi, _ := version.GreaterThanOrEqualTo(cniVersion, "0.3.0"); !multi && (n4 > 1 || n6 > 1) {
		return fmt.Errorf("addresses: cniVersion %s results hold one address per IP family, got %d IPv4 and %d IPv6 (use cniVersion 0.3.0 or later)", cniVersion, n4, n6)
	}
	return nil
}

// parseRoutes validates each route's dst and gw, then decodes it as the
// result's route type, which also carries mtu, advmss, priority, table and
// scope for 1.1.0 results.
func parseRoutes(raws []json.RawMessage) ([]*types.Route, error) {
	routes := make([]*types.Route, 0, len(raws))
	for i, rawRoute := range raws {
		key := fmt.Sprintf("ipam.routes[%d]", i)
		var r struct {
			Dst string `json:"dst"`
			GW  string `json:"gw"`
		}
		if err := result.DecodeConfigAt(key, rawRoute, &r); err != nil {
			return nil, err
		}
		if r.Dst == "" {
			return nil, fmt.Errorf("%s.dst: missing", key)
		}
		dst, err := netip.ParsePrefix(r.Dst)
		if err != nil {
			return nil, fmt.Errorf("%s.dst: %q is not a CIDR", key, r.Dst)
		}
		if dst.Masked() != dst {
			return nil, fmt.Errorf("%s.dst: %q has host bits set (the network is %s)", key, r.Dst, dst.Masked())
		}
		if r.GW != "" {
			gw, err := netip.ParseAddr(r.GW)
			if err != nil || gw.Zone() != "" {
				return nil, fmt.Errorf("%s.gw: %q is not an IP address", key, r.GW)
			}
			if gw.Is4() != dst.Addr().Is4() {
				return nil, fmt.Errorf("%s.gw: %s is not of the same IP family as dst %s", key, gw, dst)
			}
		}
		route := &types.Route{}
		if err := result.DecodeConfigAt(key, rawRoute, route); err != nil {
			return nil, err
		}
		routes = append(routes, route)
	}
	return routes, nil
}

// checkDNS refuses a nameserver resolv.conf could not use.
func checkDNS(dns types.DNS) error {
	for i, s := range dns.Nameservers {
		if _, err := netip.ParseAddr(s); err != nil {
			return fmt.Errorf("ipam.dns.nameservers[%d]: %q is not an IP address", i, s)
		}
	}
	return nil
}
