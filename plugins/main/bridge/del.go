package bridge

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ipam"
	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/ns"
)

// cmdDel undoes ADD in reverse order. Everything already gone is success,
// and one failing step does not stop the others (the spec: DEL must clean
// up what it can, also without the netns or a prevResult).
func (p *bridgePlugin) cmdDel(args *skel.CmdArgs) error {
	conf, err := parseConfig(args.StdinData, args.Args)
	if err != nil {
		return err
	}
	// The container namespace is opened by deleteVeth itself: a missing
	// or stale one is no reason to keep the other steps from running.
	a, err := openAttachment(conf, args, "DEL")
	if err != nil {
		return err
	}
	defer a.close()

	var errs []error
	if conf.MacSpoofChk {
		errs = append(errs, teardownMacSpoofCheck(a.owner()))
	}
	if conf.IPMasq {
		// Both backends: the one used at ADD may not be the configured one
		// (config changed, or an upstream ADD). No netns needed.
		errs = append(errs, netfilter.TeardownMasqAll(a.owner()))
	}
	errs = append(errs, a.deleteVeth())
	if conf.layer3 {
		errs = append(errs, ipam.Del(context.TODO(), conf.IPAM.Type, conf.raw))
	}
	return errors.Join(errs...)
}

// deleteVeth removes the veth pair. Deleting the container end removes the
// host end with it. When the container end cannot be reached (no netns,
// namespace gone, interface already deleted) the host end is looked up by
// the alias ADD gave it, in case it leaked.
func (a *attachment) deleteVeth() error {
	if deleted, err := a.deleteContainerEnd(); err != nil || deleted {
		return err
	}
	return a.deleteHostEndByAlias()
}

func (a *attachment) deleteContainerEnd() (bool, error) {
	nsPath, ifName := a.args.Netns, a.args.IfName
	if nsPath == "" {
		return false, nil
	}
	contNS, err := ns.Open(nsPath)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, ns.ErrNotNetNS) {
		return false, nil // the namespace is gone (a file left at the path is not one)
	}
	if err != nil {
		return false, fmt.Errorf("DEL %q: %w", ifName, err)
	}
	defer contNS.Close()
	h, err := contNS.Handle()
	if err != nil {
		return false, err
	}
	defer h.Close()
	l, err := ip.LinkByName(h, ifName)
	if errors.Is(err, ip.ErrLinkNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("in %s: %w", nsPath, err)
	}
	if _, ok := l.(*netlink.Veth); !ok {
		// Not ours: another plugin's interface of that name is left alone.
		return false, nil
	}
	if err := ip.DelLinkByName(h, ifName); err != nil {
		return false, fmt.Errorf("in %s: %w", nsPath, err)
	}
	return true, nil
}

func (a *attachment) deleteHostEndByAlias() error {
	links, err := ip.LinkList(a.hostH)
	if err != nil {
		return err
	}
	alias := vethAlias(a.args.ContainerID, a.args.IfName)
	var errs []error
	for _, l := range links {
		if _, ok := l.(*netlink.Veth); ok && l.Attrs().Alias == alias {
			errs = append(errs, ip.DelLinkByName(a.hostH, l.Attrs().Name))
		}
	}
	return errors.Join(errs...)
}
