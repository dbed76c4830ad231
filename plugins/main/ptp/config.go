package ptp

import (
	"github.com/containernetworking/cni/pkg/skel"

	"github.com/cniforge/plugins/pkg/attach"
)

// netConf is ptp's config. Keys and defaults are upstream's.
type netConf struct {
	attach.NetConf
	attach.Masq // ipMasq, ipMasqBackend
	// MTU of both veth ends; 0 keeps the kernel default.
	MTU int `json:"mtu"`
}

func parse(args *skel.CmdArgs) (*netConf, error) { return parseConfig(args.StdinData) }

// parseConfig decodes and validates stdin, the same way for every command.
// It touches no kernel state and leaves prevResult unparsed.
func parseConfig(stdin []byte) (*netConf, error) {
	conf := &netConf{}
	if err := attach.Decode(stdin, conf); err != nil {
		return nil, err
	}
	if err := attach.RequireIPAM(&conf.NetConf, "ptp needs an IPAM plugin to hand out addresses"); err != nil {
		return nil, err
	}
	if err := attach.ValidateMTU(conf.MTU); err != nil {
		return nil, err
	}
	if err := conf.Masq.Validate(); err != nil {
		return nil, err
	}
	return conf, nil
}
