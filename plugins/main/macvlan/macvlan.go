package macvlan

import (
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/link"
)

func add(a *attach.Attachment, c *config) (types.Result, error) {
	m, err := link.ResolveMasterOf(a, c.LinkInContainer, c.Master, c.MTU)
	if err != nil {
		return nil, err
	}
	la := netlink.NewLinkAttrs()
	la.MTU = c.MTU
	la.HardwareAddr = c.mac
	opts := link.AddOptions{Master: m, DNS: c.DNS}
	if c.layer3 {
		opts.Addrs = a.IPAMAdd
	}
	return link.Add(a, &netlink.Macvlan{LinkAttrs: la, Mode: c.mode, BCQueueLen: c.BCQueueLen}, opts)
}

// check compares the link with prevResult and the config.
func check(a *attach.Attachment, c *config, prev *current.Result) error {
	return link.CheckAttachment(a, prev, &link.MasterRef{InContainer: c.LinkInContainer, Name: c.Master},
		link.Want{Kind: "macvlan", Mode: c.modeStr, MTU: c.MTU})
}
