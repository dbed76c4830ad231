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
	opts := link.AddOptions{DNS: c.DNS, CreateErr: func(err error, m *link.Master) error {
		if errors.Is(err, unix.EEXIST) {
			// The kernel keeps one vlan per ID and real device, wherever
			// the vlan lives now.
			return fmt.Errorf("vlanId %d on master %q in %s: another attachment (or link) already uses that VLAN ID on that master: %w",
				c.id, c.Master, m.NS.Path(), err)
		}
		return err
	}}
	return c.Keys.AddOnMaster(a, c.Master, &netlink.Vlan{LinkAttrs: netlink.NewLinkAttrs(), VlanId: c.id}, c.layer3, opts)
}

func check(a *attach.Attachment, c *netConf, prev *current.Result) error {
	return link.CheckAttachment(a, prev, &link.MasterRef{InContainer: c.LinkInContainer, Name: c.Master},
		link.Want{Kind: "vlan", Mode: fmt.Sprintf("vlan %d", c.id), MTU: c.MTU})
}
