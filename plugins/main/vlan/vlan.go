package vlan

import (
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/link"
)

func add(a *attach.Attachment, c *netConf) (types.Result, error) {
	m, err := link.ResolveMasterOf(a, c.LinkInContainer, c.Master, c.MTU)
	if err != nil {
		return nil, err
	}
	contNS, contH, err := a.Container()
	if err != nil {
		return nil, err
	}

	var ipamRes *current.Result
	if c.layer3 {
		if ipamRes, err = a.IPAMAdd(); err != nil {
			return nil, err
		}
	}
	if err := a.Step(StepIPAM); err != nil {
		return nil, err
	}

	la := netlink.NewLinkAttrs()
	la.ParentIndex = m.Link.Attrs().Index
	la.MTU = c.MTU
	ifName := a.Args.IfName
	if _, err := link.Create(&netlink.Vlan{LinkAttrs: la, VlanId: c.id}, link.CreateOptions{
		MasterNS: m.NS, MasterH: m.H, ContNS: contNS, ContH: contH, IfName: ifName, Alias: a.Alias(),
	}); err != nil {
		if errors.Is(err, unix.EEXIST) {
			// The kernel keeps one vlan per ID and real device, wherever
			// the vlan lives now.
			return nil, fmt.Errorf("vlanId %d on master %q in %s: another attachment (or link) already uses that VLAN ID on that master: %w",
				c.id, c.Master, m.NS.Path(), err)
		}
		return nil, err
	}
	a.Undo.Push("delete vlan "+ifName, func() error { return ip.DelLinkByName(contH, ifName) })
	if err := a.Step(StepLink); err != nil {
		return nil, err
	}

	res, err := link.Finish(link.FinishOptions{
		ContNS: contNS, ContH: contH, IfName: ifName, Sandbox: a.Args.Netns,
		IPAM: ipamRes, DNS: c.DNS, Log: a.Log,
	})
	if err != nil {
		return nil, err
	}
	if err := a.Step(StepConfigure); err != nil {
		return nil, err
	}
	return res, nil
}

// del deletes the container's vlan when it is ours; the frame releases
// IPAM after it.
func del(a *attach.Attachment, c *netConf) []error {
	return []error{link.DeleteOwned(a.Args.Netns, a.Args.IfName, "vlan", a.Alias())}
}

func check(a *attach.Attachment, c *netConf, prev *current.Result) error {
	idx, ipcs, err := a.ContainerIface(prev)
	if err != nil {
		return err
	}
	m, err := link.ResolveMasterOf(a, c.LinkInContainer, c.Master, c.MTU)
	if err != nil {
		return err
	}
	contNS, contH, err := a.Container()
	if err != nil {
		return err
	}
	_, err = link.Check(contNS, contH, link.Want{
		Kind: "vlan", Mode: fmt.Sprintf("vlan %d", c.id), Master: m.Link, MTU: c.MTU,
		Iface: prev.Interfaces[idx], IPs: ipcs, Routes: prev.Routes,
	})
	return err
}
