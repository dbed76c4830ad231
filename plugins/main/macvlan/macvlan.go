package macvlan

import (
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/link"
)

func add(a *attach.Attachment, c *config) (types.Result, error) {
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
	la.HardwareAddr = c.mac
	mv := &netlink.Macvlan{LinkAttrs: la, Mode: c.mode, BCQueueLen: c.BCQueueLen}
	ifName := a.Args.IfName
	if _, err := link.Create(mv, link.CreateOptions{
		MasterNS: m.NS, MasterH: m.H, ContNS: contNS, ContH: contH, IfName: ifName, Alias: a.Alias(),
	}); err != nil {
		return nil, err
	}
	a.Undo.Push("delete macvlan "+ifName, func() error { return ip.DelLinkByName(contH, ifName) })
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

// del deletes the container's macvlan when it is ours; the frame releases
// IPAM after it.
func del(a *attach.Attachment, c *config) []error {
	return []error{link.DeleteOwned(a.Args.Netns, a.Args.IfName, "macvlan", a.Alias())}
}

// check compares the link with prevResult and the config.
func check(a *attach.Attachment, c *config, prev *current.Result) error {
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
		Kind: "macvlan", Mode: c.modeStr, Master: m.Link, MTU: c.MTU,
		Iface: prev.Interfaces[idx], IPs: ipcs, Routes: prev.Routes,
	})
	return err
}
