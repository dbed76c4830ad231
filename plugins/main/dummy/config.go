package dummy

import (
	"github.com/containernetworking/cni/pkg/skel"

	"github.com/cniforge/plugins/pkg/attach"
)

// netConf is dummy's config: the common keys (name, ipam, dns). Upstream's.
type netConf struct {
	attach.NetConf
}

func parse(args *skel.CmdArgs) (*netConf, error) { return parseConfig(args.StdinData) }

// parseConfig decodes and validates stdin, the same way for every command.
// It touches no kernel state and leaves prevResult unparsed.
func parseConfig(stdin []byte) (*netConf, error) {
	c := &netConf{}
	if err := attach.Decode(stdin, c); err != nil {
		return nil, err
	}
	if err := attach.RequireIPAM(&c.NetConf, "a dummy link is there for the addresses IPAM hands out"); err != nil {
		return nil, err
	}
	return c, nil
}
