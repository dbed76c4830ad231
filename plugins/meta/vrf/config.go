package vrf

import (
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/result"
)

// netConf is vrf's config. Keys are upstream's.
type netConf struct {
	attach.NetConf
	// VRFName is the VRF device in the container; required.
	VRFName string `json:"vrfname"`
	// Table is the VRF's routing table; 0 picks a free one when the VRF is
	// created, and accepts whatever an existing VRF has.
	Table uint32 `json:"table"`
}

func parse(args *skel.CmdArgs) (*netConf, error) { return parseConfig(args.StdinData) }

// parseConfig decodes and validates stdin, the same way for every
// command. It touches no kernel state and leaves prevResult unparsed.
func parseConfig(stdin []byte) (*netConf, error) {
	c := &netConf{}
	if err := attach.Decode(stdin, c); err != nil {
		return nil, err
	}
	if c.VRFName == "" {
		return nil, result.InvalidConfig(errors.New("vrfname: missing"))
	}
	if err := attach.ValidateIfName("vrfname", c.VRFName); err != nil {
		return nil, err
	}
	if c.Table >= 253 && c.Table <= 255 {
		return nil, result.InvalidConfig(fmt.Errorf("table: %d is one of the kernel's own tables (default, main, local)", c.Table))
	}
	return c, nil
}
