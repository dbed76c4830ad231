package hostlocal

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/cniforge/plugins/pkg/result"
)

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
