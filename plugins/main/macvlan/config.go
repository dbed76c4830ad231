package macvlan

import (
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/link"
	"github.com/cniforge/plugins/pkg/result"
)

// netConf is macvlan's config. Keys and defaults are upstream's.
type netConf struct {
	attach.NetConf
	// Master is the parent interface; "" takes the default route's.
	Master string `json:"master"`
	// Mode is bridge (default), private, vepa or passthru.
	Mode string `json:"mode"`
	MTU  int    `json:"mtu"`
	// MAC is the link's MAC, after runtimeConfig.mac, args.cni.mac and
	// CNI_ARGS MAC.
	MAC string `json:"mac"`
	// LinkInContainer: the master lives in the container namespace.
	LinkInContainer bool `json:"linkInContainer"`
	// BCQueueLen is the broadcast/multicast queue length (0: the kernel's).
	BCQueueLen uint32 `json:"bcqueuelen"`
	link.MACArgs
}

// config is a validated netConf with what is derived from it.
type config struct {
	netConf
	mode    netlink.MacvlanMode
	mac     net.HardwareAddr // nil: the kernel picks
	layer3  bool
	modeStr string
}

var modes = map[string]netlink.MacvlanMode{
	"bridge":   netlink.MACVLAN_MODE_BRIDGE,
	"private":  netlink.MACVLAN_MODE_PRIVATE,
	"vepa":     netlink.MACVLAN_MODE_VEPA,
	"passthru": netlink.MACVLAN_MODE_PASSTHRU,
}

func parse(args *skel.CmdArgs) (*config, error) { return parseConfig(args.StdinData, args.Args) }

// parseConfig decodes stdin and CNI_ARGS, applies defaults and validates
// every key, the same way for every command. It touches no kernel state
// and leaves prevResult unparsed. Codes: 6 undecodable, 4 bad CNI_ARGS, 7
// invalid values (naming key and value).
func parseConfig(stdin []byte, cniArgs string) (*config, error) {
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
		c.modeStr = "bridge"
	}
	m, ok := modes[c.modeStr]
	if !ok {
		return nil, result.InvalidConfig(fmt.Errorf("mode: %q is not bridge, private, vepa or passthru", c.Mode))
	}
	c.mode = m
	if err := attach.ValidateMTU(c.MTU); err != nil {
		return nil, err
	}
	var err error
	if c.layer3, err = link.Layer3(&c.NetConf); err != nil {
		return nil, err
	}
	if c.mac, err = link.PickMAC(c.MACArgs.Sources(c.MAC), cniArgs); err != nil {
		return nil, err
	}
	return c, nil
}
