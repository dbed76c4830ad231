package macvlan

import (
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/link"
)

func add(a *attach.Attachment, c *config) (types.Result, error) {
	la := netlink.NewLinkAttrs()
	la.HardwareAddr = c.mac
	l := &netlink.Macvlan{LinkAttrs: la, Mode: c.mode, BCQueueLen: c.BCQueueLen}
	return c.Keys.AddOnMaster(a, c.Master, l, c.layer3, link.AddOptions{DNS: c.DNS})
}

// check compares the link with prevResult and the config.
func check(a *attach.Attachment, c *config, prev *current.Result) error {
	return link.CheckAttachment(a, prev, &link.MasterRef{InContainer: c.LinkInContainer, Name: c.Master},
		link.Want{Kind: "macvlan", Mode: c.modeStr, MTU: c.MTU})
}
