package loopback

import (
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/result"
)

const loName = "lo"

func cmdAdd(args *skel.CmdArgs) error {
	conf, err := parseConfig(args.StdinData)
	if err != nil {
		return err
	}
	h, closeNS, err := openHandle(args.Netns)
	if err != nil {
		return err
	}
	defer closeNS()

	lo, err := ip.LinkByName(h, loName)
	if err != nil {
		return fmt.Errorf("in %s: %w", args.Netns, err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("set %q up in %s: %w", loName, args.Netns, err)
	}

	// Chained after another plugin, loopback changes nothing in the result.
	if conf.prevResult != nil {
		return result.Print(conf.prevResult, conf.CNIVersion)
	}
	res, err := loResult(h, lo, args.Netns)
	if err != nil {
		return err
	}
	res.CNIVersion = current.ImplementedSpecVersion
	return result.Print(res, conf.CNIVersion)
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

func cmdDel(args *skel.CmdArgs) error {
	if _, err := parseConfig(args.StdinData); err != nil {
		return err
	}
	// DEL must succeed when there is nothing left to clean up.
	if args.Netns == "" {
		return nil
	}
	n, err := ns.Open(args.Netns)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, ns.ErrNotNetNS) {
		// The namespace, and lo with it, is gone; a path that is no longer
		// a namespace is what a runtime leaves after unmounting one.
		return nil
	}
	if err != nil {
		return result.InvalidNetNS(err)
	}
	n.Close()
	h, closeNS, err := openHandle(args.Netns)
	if err != nil {
		return err
	}
	defer closeNS()
	lo, err := ip.LinkByName(h, loName)
	if errors.Is(err, ip.ErrLinkNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("in %s: %w", args.Netns, err)
	}
	if err := h.LinkSetDown(lo); err != nil {
		return fmt.Errorf("set %q down in %s: %w", loName, args.Netns, err)
	}
	return nil
}

func cmdCheck(args *skel.CmdArgs) error {
	if _, err := parseConfig(args.StdinData); err != nil {
		return err
	}
	h, closeNS, err := openHandle(args.Netns)
	if err != nil {
		return err
	}
	defer closeNS()
	lo, err := ip.LinkByName(h, loName)
	if err != nil {
		return fmt.Errorf("in %s: %w", args.Netns, err)
	}
	if lo.Attrs().Flags&net.FlagUp == 0 {
		return fmt.Errorf("%q is down in %s", loName, args.Netns)
	}
	return nil
}

// cmdGC has nothing to collect: lo lives and dies with its namespace.
func cmdGC(args *skel.CmdArgs) error {
	_, err := parseConfig(args.StdinData)
	return err
}

// cmdStatus: loopback depends on nothing that could be unavailable.
func cmdStatus(args *skel.CmdArgs) error {
	_, err := parseConfig(args.StdinData)
	return err
}

// openHandle opens the container namespace and a netlink handle inside it,
// with the function that closes both.
func openHandle(nsPath string) (*netlink.Handle, func(), error) {
	n, h, err := ns.OpenContainer(nsPath)
	if err != nil {
		return nil, nil, err
	}
	return h, func() { h.Close(); n.Close() }, nil
}
