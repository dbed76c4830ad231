package tap

import (
	"fmt"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/link"
)

// check compares the kernel with prevResult after the frame ran IPAM's
// CHECK: the tap is a tap, up, persistent, with the owner, group,
// multi-queue, MTU and bridge the config asks for, the MAC ADD reported,
// and the addresses and routes (pkg/link's Check). It changes nothing.
func check(a *attach.Attachment, c *config, prev *current.Result) error {
	tgt, err := a.CheckTarget(prev)
	if err != nil {
		return err
	}
	contNS, contH, name := tgt.NS, tgt.H, a.Args.IfName
	// Kind, up, MTU, MAC, addresses and routes.
	l, err := link.Check(contNS, contH, link.Want{
		Kind: "tuntap", MTU: c.MTU, Iface: tgt.Iface, IPs: tgt.IPs, Routes: prev.Routes,
	})
	if err != nil {
		return err
	}
	t := l.(*netlink.Tuntap)
	where := fmt.Sprintf("%q in %s", name, contNS.Path())
	switch {
	case t.Mode != netlink.TUNTAP_MODE_TAP:
		return fmt.Errorf("%s is a tun, not a tap", where)
	case t.NonPersist:
		return fmt.Errorf("%s is not persistent", where)
	case c.Owner != nil && t.Owner != *c.Owner:
		return fmt.Errorf("%s has owner %d, config says %d", where, t.Owner, *c.Owner)
	case c.Group != nil && t.Group != *c.Group:
		return fmt.Errorf("%s has group %d, config says %d", where, t.Group, *c.Group)
	case c.MultiQueue != (t.Flags&netlink.TUNTAP_MULTI_QUEUE != 0):
		return fmt.Errorf("%s: multi-queue is %t, config says %t", where, !c.MultiQueue, c.MultiQueue)
	}
	if c.Bridge != "" {
		br, err := attach.CheckLink(contNS, contH, c.Bridge, "bridge", false)
		if err != nil {
			return fmt.Errorf("bridge: %w", err)
		}
		if err := attach.CheckMaster(contNS, l, br); err != nil {
			return err
		}
	}
	return nil
}
