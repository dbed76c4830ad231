package macvlan

import (
	"net"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/link"
)

// netConf is macvlan's config. Keys and defaults are upstream's.
type netConf struct {
	attach.NetConf
	link.Keys // master, mtu, linkInContainer
	// Mode is bridge (default), private, vepa or passthru.
	Mode string `json:"mode"`
	// MAC is the link's MAC, after runtimeConfig.mac, args.cni.mac and
	// CNI_ARGS MAC.
	MAC string `json:"mac"`
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
	var err error
	if c.modeStr, c.mode, err = link.ParseMode(c.Mode, "bridge", link.MacvlanModes); err != nil {
		return nil, err
	}
	if c.layer3, err = c.Keys.Validate(&c.NetConf, true); err != nil {
		return nil, err
	}
	if c.mac, err = link.PickMAC(c.MACArgs.Sources(c.MAC), cniArgs); err != nil {
		return nil, err
	}
	return c, nil
}
