package ipvlan

import (
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/link"
)

// netConf is ipvlan's config. Keys and defaults are upstream's.
type netConf struct {
	attach.NetConf
	// master ("" takes prevResult's single interface when chained, else
	// the default route's), mtu, linkInContainer.
	link.Keys
	// Mode is l2 (default), l3 or l3s.
	Mode string `json:"mode"`
}

// config is a validated netConf with what is derived from it.
type config struct {
	netConf
	mode    netlink.IPVlanMode
	modeStr string
	layer3  bool
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
	var err error
	if c.modeStr, c.mode, err = link.ParseMode(c.Mode, "l2", link.IPVlanModes); err != nil {
		return nil, err
	}
	if c.layer3, err = c.Keys.Validate(&c.NetConf, true); err != nil {
		return nil, err
	}
	return c, nil
}
