package sbr

import (
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/result"
)

// FirstTable is where the search for a free table starts, and
// lastTable where it ends (upstream's range: 100 and the 999 after it).
const (
	FirstTable = 100
	lastTable  = FirstTable + 999
)

// netConf is sbr's config. Keys are upstream's.
type netConf struct {
	attach.NetConf
	// Table, when set, makes sbr add only the rules, into this table, and
	// leave every route alone.
	Table *int `json:"table,omitempty"`
	// Gateways are static gateways, at most one per family, used for the
	// default route in the table instead of prevResult's gateway.
	Gateways []string `json:"gateways,omitempty"`
	// AddSourceHints sets the address as the preferred source on the
	// interface's subnet routes.
	AddSourceHints bool `json:"addSourceHints,omitempty"`

	gw4, gw6 net.IP
}

func parse(args *skel.CmdArgs) (*netConf, error) { return parseConfig(args.StdinData) }

// parseConfig decodes and validates stdin, the same way for every
// command. It touches no kernel state and leaves prevResult unparsed.
func parseConfig(stdin []byte) (*netConf, error) {
	c := &netConf{}
	if err := attach.Decode(stdin, c); err != nil {
		return nil, err
	}
	if t := c.Table; t != nil {
		// 0 is "unspecified"; 253-255 are the kernel's default, main and
		// local tables, which a source rule must not point at.
		if *t <= 0 || *t == 253 || *t == 254 || *t == 255 || int64(*t) > 0xFFFFFFFF {
			return nil, result.InvalidConfig(fmt.Errorf("table: %d is not a routing table sbr can use (1-4294967295, not 253-255)", *t))
		}
	}
	for i, g := range c.Gateways {
		ip := net.ParseIP(g)
		if ip == nil {
			return nil, result.InvalidConfig(fmt.Errorf("gateways[%d]: %q is not an IP address", i, g))
		}
		if ip4 := ip.To4(); ip4 != nil {
			if c.gw4 != nil {
				return nil, result.InvalidConfig(fmt.Errorf("gateways[%d]: %q is a second IPv4 gateway (one per family)", i, g))
			}
			c.gw4 = ip4
		} else {
			if c.gw6 != nil {
				return nil, result.InvalidConfig(fmt.Errorf("gateways[%d]: %q is a second IPv6 gateway (one per family)", i, g))
			}
			c.gw6 = ip
		}
	}
	return c, nil
}

// gateway returns the gateway for addr: the static one of its family, or
// the one prevResult gave.
func (c *netConf) gateway(addr net.IP, fromResult net.IP) net.IP {
	if addr.To4() != nil && c.gw4 != nil {
		return c.gw4
	}
	if addr.To4() == nil && c.gw6 != nil {
		return c.gw6
	}
	return fromResult
}
