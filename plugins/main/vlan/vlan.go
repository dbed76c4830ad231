package vlan

import (
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/link"
)

func add(a *attach.Attachment, c *netConf) (types.Result, error) {
	m, err := link.ResolveMasterOf(a, c.LinkInContainer, c.Master, c.MTU)
	if err != nil {
		return nil, err
	}
	la := netlink.NewLinkAttrs()
	la.MTU = c.MTU
	opts := link.AddOptions{Master: m, DNS: c.DNS, CreateErr: func(err error) error {
		if errors.Is(err, unix.EEXIST) {
			// The kernel keeps one vlan per ID and real device, wherever
			// the vlan lives now.
			return fmt.Errorf("vlanId %d on master %q in %s: another attachment (or link) already uses that VLAN ID on that master: %w",
				c.id, c.Master, m.NS.Path(), err)
		}
		return err
	}}
	if c.layer3 {
		opts.Addrs = a.IPAMAdd
	}
	return link.Add(a, &netlink.Vlan{LinkAttrs: la, VlanId: c.id}, opts)
}

func check(a *attach.Attachment, c *netConf, prev *current.Result) error {
	return link.CheckAttachment(a, prev, &link.MasterRef{InContainer: c.LinkInContainer, Name: c.Master},
		link.Want{Kind: "vlan", Mode: fmt.Sprintf("vlan %d", c.id), MTU: c.MTU})
}
