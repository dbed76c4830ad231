package loopback

import (
	"errors"
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/result"
)

const loName = "lo"

func add(a *attach.Attachment, conf *netConf) (types.Result, error) {
	// Chained after another plugin, loopback changes nothing in the
	// result: parse prevResult before changing anything.
	prev, err := conf.Prev()
	if err != nil {
		return nil, err
	}
	contNS, h, err := a.Container()
	if err != nil {
		return nil, err
	}
	lo, err := ip.LinkByName(h, loName)
	if err != nil {
		return nil, fmt.Errorf("in %s: %w", contNS.Path(), err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return nil, fmt.Errorf("set %q up in %s: %w", loName, contNS.Path(), err)
	}
	if prev != nil {
		return prev, nil
	}
	res, err := loResult(h, lo, contNS.Path())
	if err != nil {
		return nil, err
	}
	res.CNIVersion = current.ImplementedSpecVersion
	return res, nil
}

// loResult describes lo as it now is: the interface and its addresses.
func loResult(h *netlink.Handle, lo netlink.Link, nsPath string) (*current.Result, error) {
	addrs, err := ip.AddrList(h, lo, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("addresses of %q in %s: %w", loName, nsPath, err)
	}
	res := &current.Result{
		Interfaces: []*current.Interface{{
			Name:    loName,
			Mac:     "00:00:00:00:00:00",
			Sandbox: nsPath,
		}},
	}
	idx := 0
	for _, a := range addrs {
		res.IPs = append(res.IPs, &current.IPConfig{
			Interface: &idx,
			Address:   net.IPNet{IP: a.IP, Mask: a.Mask},
		})
	}
	return res, nil
}

// del sets lo down. DEL must succeed when there is nothing left to clean
// up: no netns, a namespace that is gone, or a path that is no longer one.
// Any other failure to open it is reported (code 8).
func del(a *attach.Attachment, _ *netConf) []error {
	n, err := ns.OpenForDel(a.Args.Netns)
	if err != nil {
		return []error{result.InvalidNetNS(err)}
	}
	if n == nil {
		// The namespace, and lo with it, is gone; a path that is no longer
		// a namespace is what a runtime leaves after unmounting one.
		return nil
	}
	defer n.Close()
	h := n.H
	lo, err := ip.LinkByName(h, loName)
	if errors.Is(err, ip.ErrLinkNotFound) {
		return nil
	}
	if err != nil {
		return []error{fmt.Errorf("in %s: %w", n.Path(), err)}
	}
	if err := h.LinkSetDown(lo); err != nil {
		return []error{fmt.Errorf("set %q down in %s: %w", loName, n.Path(), err)}
	}
	return nil
}

func check(a *attach.Attachment, _ *netConf, _ *current.Result) error {
	contNS, h, err := a.Container()
	if err != nil {
		return err
	}
	_, err = attach.CheckLink(contNS, h, loName, "", true)
	return err
}
