package loopback

import (
	"github.com/containernetworking/cni/pkg/skel"

	"github.com/cniforge/plugins/pkg/attach"
)

// netConf is loopback's config: it has no keys of its own.
type netConf struct {
	attach.NetConf
}

// parseConfig decodes and validates stdin. It touches no kernel state.
func parseConfig(args *skel.CmdArgs) (*netConf, error) {
	conf := &netConf{}
	if err := attach.Decode(args.StdinData, conf); err != nil {
		return nil, err
	}
	return conf, nil
}
