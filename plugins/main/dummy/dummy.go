package dummy

import (
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/link"
)

func add(a *attach.Attachment, c *netConf) (types.Result, error) {
	contNS, contH, err := a.Container()
	if err != nil {
		return nil, err
	}
	ipamRes, err := a.IPAMAdd()
	if err != nil {
		return nil, err
	}
	if err := a.Step(StepIPAM); err != nil {
		return nil, err
	}

	ifName := a.Args.IfName
	d := &netlink.Dummy{LinkAttrs: netlink.NewLinkAttrs()}
	// A dummy has no master: it is made in the container itself, still
	// under a temporary name until it carries the alias.
	if _, err := link.Create(d, link.CreateOptions{
		MasterNS: contNS, MasterH: contH, ContNS: contNS, ContH: contH, IfName: ifName, Alias: a.Alias(),
	}); err != nil {
		return nil, err
	}
	a.Undo.Push("delete dummy "+ifName, func() error { return ip.DelLinkByName(contH, ifName) })
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

// del deletes the container's dummy when it is ours; the frame releases
// IPAM after it.
func del(a *attach.Attachment, c *netConf) []error {
	return []error{link.DeleteOwned(a.Args.Netns, a.Args.IfName, "dummy", a.Alias())}
}

func check(a *attach.Attachment, c *netConf, prev *current.Result) error {
	idx, ipcs, err := a.ContainerIface(prev)
	if err != nil {
		return err
	}
	contNS, contH, err := a.Container()
	if err != nil {
		return err
	}
	_, err = link.Check(contNS, contH, link.Want{Kind: "dummy", Iface: prev.Interfaces[idx], IPs: ipcs, Routes: prev.Routes})
	return err
}
