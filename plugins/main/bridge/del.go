package bridge

import (
	"context"
	"errors"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ipam"
	"github.com/cniforge/plugins/pkg/netfilter"
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
	// Whatever ipMasq says now, and on both backends: the ADD may have run
	// with another ipMasq or ipMasqBackend, or be an upstream one. No netns
	// needed, and cheap when there is nothing.
	errs = append(errs, netfilter.TeardownMasqAll(a.owner()))
	errs = append(errs, a.deleteVeth())
	if conf.layer3 {
		errs = append(errs, ipam.Del(context.TODO(), conf.IPAM.Type, conf.raw))
	}
	return errors.Join(errs...)
}

// deleteVeth removes the veth pair. Deleting the container end removes the
// host end with it. When the container end cannot be reached (no netns,
// namespace gone, interface already deleted) the host end is looked up by
// the alias ADD gave it, in case it leaked. An interface of that name that
// is not ours (another plugin's eth0) is left alone.
func (a *attachment) deleteVeth() error {
	alias := ip.AttachmentAlias(a.args.ContainerID, a.args.IfName)
	if deleted, err := ip.DeleteContainerVeth(a.args.Netns, a.args.IfName, alias); err != nil || deleted {
		return err
	}
	return ip.DeleteVethsByAlias(a.hostH, alias)
}
