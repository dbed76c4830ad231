package vlan

import (
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/link"
	"github.com/cniforge/plugins/pkg/result"
)

// netConf is vlan's config. Keys and defaults are upstream's.
type netConf struct {
	attach.NetConf
	link.Keys // master (required here), mtu, linkInContainer
	// VlanID is the 802.1Q ID, 0-4094; absent is 0, as upstream's
	// (loadConf takes the int's zero value and checks 0-4094).
	VlanID int `json:"vlanId"`

	id     int
	layer3 bool
}

func parse(args *skel.CmdArgs) (*netConf, error) { return parseConfig(args.StdinData) }

// parseConfig decodes stdin and validates every key, the same way for
// every command. It touches no kernel state and leaves prevResult
// unparsed.
func parseConfig(stdin []byte) (*netConf, error) {
	c := &netConf{}
	if err := attach.Decode(stdin, c); err != nil {
		return nil, err
	}
	if c.Master == "" {
		return nil, result.InvalidConfig(errors.New("master: missing (the interface the vlan sits on)"))
	}
	if c.id = c.VlanID; c.id < 0 || c.id > 4094 {
		return nil, result.InvalidConfig(fmt.Errorf("vlanId: %d out of range 0-4094", c.id))
	}
	var err error
	if c.layer3, err = c.Keys.Validate(&c.NetConf, false); err != nil {
		return nil, err
	}
	return c, nil
}
