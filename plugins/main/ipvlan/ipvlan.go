package ipvlan

import (
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/link"
	"github.com/cniforge/plugins/pkg/result"
)

// masterName is the master to look up: the config's, or, chained, the
// single interface prevResult lists ("" then: the default route's).
func masterName(c *config, prev *current.Result) (string, error) {
	if c.Master != "" || prev == nil {
		return c.Master, nil
	}
	if len(prev.Interfaces) != 1 || prev.Interfaces[0].Name == "" {
		return "", result.InvalidConfig(fmt.Errorf("master: not set, and prevResult lists %d interfaces, not a single named one to take it from", len(prev.Interfaces)))
	}
	return prev.Interfaces[0].Name, nil
}

func add(a *attach.Attachment, c *config) (types.Result, error) {
	prev, err := c.Prev() // chained use; code 6 when it does not parse
	if err != nil {
		return nil, err
	}
	name, err := masterName(c, prev)
	if err != nil {
		return nil, err
	}
	opts := link.AddOptions{DNS: c.DNS}
	if prev != nil {
		// Chained without ipam: the addresses the previous plugin got.
		opts.Addrs = func() (*current.Result, error) { return prev, nil }
	}
	return c.Keys.AddOnMaster(a, name, &netlink.IPVlan{LinkAttrs: netlink.NewLinkAttrs(), Mode: c.mode}, c.layer3, opts)
}

// check compares the link with prevResult and the config. The master is
// compared when "master" is set: chained, prevResult is this plugin's own
// result by now and no longer names the previous plugin's interface.
func check(a *attach.Attachment, c *config, prev *current.Result) error {
	var master *link.MasterRef
	if c.Master != "" {
		master = &link.MasterRef{InContainer: c.LinkInContainer, Name: c.Master}
	}
	return link.CheckAttachment(a, prev, master, link.Want{Kind: "ipvlan", Mode: c.modeStr, MTU: c.MTU})
}
