package static

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// cniArgs is what static reads from the legacy CNI_ARGS variable
// ("IgnoreUnknown=1;IP=10.1.0.5/24,fd00::5/64;GATEWAY=10.1.0.1").
type cniArgs struct {
	ip      string // IP: comma-separated CIDRs
	gateway string // GATEWAY: comma-separated addresses
}

// parseCNIArgs reads CNI_ARGS the way upstream plugins do (the cni library's
// LoadArgs): keys are case-sensitive, and a key static does not know is an
// error unless IgnoreUnknown is true. Runtimes that pass extra keys
// (K8S_POD_NAME, ...) set IgnoreUnknown=1.
func parseCNIArgs(s string) (cniArgs, error) {
	var (
		out          cniArgs
		ignore       bool
		unknownFirst string
	)
	for _, pair := range strings.Split(s, ";") {
		if pair == "" {
			continue // a trailing ";" carries nothing
		}
		k, v, ok := strings.Cut(pair, "=")
		if !ok || k == "" {
			return cniArgs{}, fmt.Errorf("CNI_ARGS: %q is not a KEY=VALUE pair", pair)
		}
		switch k {
		case "IP":
			out.ip = v
		case "GATEWAY":
			out.gateway = v
		case "IgnoreUnknown":
			switch strings.ToLower(v) {
			case "1", "true":
				ignore = true
			case "0", "false":
				ignore = false
			default:
				return cniArgs{}, fmt.Errorf("CNI_ARGS IgnoreUnknown: %q is not a boolean (1, true, 0, false)", v)
			}
		default:
			if unknownFirst == "" {
				unknownFirst = k
			}
		}
	}
	if unknownFirst != "" && !ignore {
		return cniArgs{}, fmt.Errorf("CNI_ARGS: unknown key %q (static reads IP and GATEWAY, case-sensitive; set IgnoreUnknown=1 to pass others)", unknownFirst)
	}
	return out, nil
}

// applyCNIArgs adds the CNI_ARGS IP addresses to the configured ones and
// sets the gateway of every address whose subnet holds a GATEWAY address.
// A GATEWAY in the subnet of no address is dropped, as upstream drops it:
// unused lists them, for ADD to warn.
func applyCNIArgs(addrs []address, env cniArgs) (out []address, unused []string, err error) {
	if env.ip != "" {
		for i, s := range strings.Split(env.ip, ",") {
			key := fmt.Sprintf("CNI_ARGS IP[%d]", i)
			a, err := parseCIDR(key, strings.TrimSpace(s))
			if err != nil {
				return nil, nil, err
			}
			a.key = key
			addrs = append(addrs, a)
		}
	}
	if env.gateway == "" {
		return addrs, nil, nil
	}
	for i, s := range strings.Split(env.gateway, ",") {
		s = strings.TrimSpace(s)
		gw, err := netip.ParseAddr(s)
		if err != nil || gw.Zone() != "" {
			return nil, nil, fmt.Errorf("CNI_ARGS GATEWAY[%d]: %q is not an IP address", i, s)
		}
		gwIP := net.IP(gw.AsSlice())
		matched := false
		for j := range addrs {
			if addrs[j].net.Contains(gwIP) {
				addrs[j].gateway = gwIP
				matched = true
			}
		}
		if !matched {
			unused = append(unused, fmt.Sprintf("GATEWAY[%d] %s", i, s))
		}
	}
	return addrs, unused, nil
}
