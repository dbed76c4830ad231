package ipvlan

import (
	"fmt"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/link"
	"github.com/cniforge/plugins/pkg/result"
)

// netConf is ipvlan's config. Keys and defaults are upstream's.
type netConf struct {
	attach.NetConf
	// Master is the parent interface; "" takes prevResult's single
	// interface when chained, else the default route's.
	Master string `json:"master"`
	// Mode is l2 (default), l3 or l3s.
	Mode string `json:"mode"`
	MTU  int    `json:"mtu"`
	// LinkInContainer: the master lives in the container namespace.
	LinkInContainer bool `json:"linkInContainer"`
}

// config is a validated netConf with what is derived from it.
type config struct {
	netConf
	mode    netlink.IPVlanMode
	modeStr string
	layer3  bool
}

var modes = map[string]netlink.IPVlanMode{
	"l2":  netlink.IPVLAN_MODE_L2,
	"l3":  netlink.IPVLAN_MODE_L3,
	"l3s": netlink.IPVLAN_MODE_L3S,
}

func parse(args *skel.CmdArgs) (*config, error) { return parseConfig(args.StdinData) }

// parseConfig decodes stdin, applies defaults and validates every key, the
// same way for every command. It touches no kernel state and leaves
// prevResult unparsed (ADD parses it for chained use).
func parseConfig(stdin []byte) (*config, error) {
	c := &config{}
	if err := attach.Decode(stdin, &c.netConf); err != nil {
		return nil, err
	}
	if c.Master != "" {
		if err := attach.ValidateIfName("master", c.Master); err != nil {
			return nil, err
		}
	}
	c.modeStr = c.Mode
	if c.modeStr == "" {
		c.modeStr = "l2"
	}
	m, ok := modes[c.modeStr]
	if !ok {
		return nil, result.InvalidConfig(fmt.Errorf("mode: %q is not l2, l3 or l3s", c.Mode))
	}
	c.mode = m
	if err := attach.ValidateMTU(c.MTU); err != nil {
		return nil, err
	}
	var err error
	if c.layer3, err = link.Layer3(&c.NetConf); err != nil {
		return nil, err
	}
	return c, nil
}
