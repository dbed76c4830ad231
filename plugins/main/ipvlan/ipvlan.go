package ipvlan

import (
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
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
	m, err := link.ResolveMasterOf(a, c.LinkInContainer, name, c.MTU)
	if err != nil {
		return nil, err
	}
	contNS, contH, err := a.Container()
	if err != nil {
		return nil, err
	}

	var addrs *current.Result
	switch {
	case c.layer3:
		if addrs, err = a.IPAMAdd(); err != nil {
			return nil, err
		}
	case prev != nil:
		// Chained without ipam: the addresses the previous plugin got.
		addrs = prev
	}
	if err := a.Step(StepIPAM); err != nil {
		return nil, err
	}

	la := netlink.NewLinkAttrs()
	la.ParentIndex = m.Link.Attrs().Index
	la.MTU = c.MTU
	ifName := a.Args.IfName
	if _, err := link.Create(&netlink.IPVlan{LinkAttrs: la, Mode: c.mode}, link.CreateOptions{
		MasterNS: m.NS, MasterH: m.H, ContNS: contNS, ContH: contH, IfName: ifName, Alias: a.Alias(),
	}); err != nil {
		return nil, err
	}
	a.Undo.Push("delete ipvlan "+ifName, func() error { return ip.DelLinkByName(contH, ifName) })
	if err := a.Step(StepLink); err != nil {
		return nil, err
	}

	res, err := link.Finish(link.FinishOptions{
		ContNS: contNS, ContH: contH, IfName: ifName, Sandbox: a.Args.Netns,
		IPAM: addrs, DNS: c.DNS, Log: a.Log,
	})
	if err != nil {
		return nil, err
	}
	if err := a.Step(StepConfigure); err != nil {
		return nil, err
	}
	return res, nil
}

// del deletes the container's ipvlan when it is ours; the frame releases
// IPAM after it.
func del(a *attach.Attachment, c *config) []error {
	return []error{link.DeleteOwned(a.Args.Netns, a.Args.IfName, "ipvlan", a.Alias())}
}

// check compares the link with prevResult and the config. The master is
// compared when "master" is set: chained, prevResult is this plugin's own
// result by now and no longer names the previous plugin's interface.
func check(a *attach.Attachment, c *config, prev *current.Result) error {
	idx, ipcs, err := a.ContainerIface(prev)
	if err != nil {
		return err
	}
	w := link.Want{Kind: "ipvlan", Mode: c.modeStr, MTU: c.MTU, Iface: prev.Interfaces[idx], IPs: ipcs, Routes: prev.Routes}
	if c.Master != "" {
		m, err := link.ResolveMasterOf(a, c.LinkInContainer, c.Master, c.MTU)
		if err != nil {
			return err
		}
		w.Master = m.Link
	}
	contNS, contH, err := a.Container()
	if err != nil {
		return err
	}
	if _, err := link.Check(contNS, contH, w); err != nil {
		return err
	}
	return nil
}
