package ptp

import (
	"context"
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ipam"
	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/ns"
)

// cmdDel undoes ADD in reverse: masquerade, veth, IPAM. Anything already
// gone is success, and a failing step does not stop the later ones: the
// IPAM reservation is released even when the namespace is gone.
func (p *ptp) cmdDel(args *skel.CmdArgs) (err error) {
	conf, err := parseConfig(args.StdinData)
	if err != nil {
		return err
	}
	var errs []error

	// Both backends, whatever the config says now: the rules may come from
	// an ADD with another ipMasq/ipMasqBackend, or from the other suite.
	// They need no addresses and no container namespace.
	if err := netfilter.TeardownMasqAll(ownerOf(conf, args)); err != nil {
		errs = append(errs, fmt.Errorf("masquerade: %w", err))
	}
	if err := deleteVeth(args, conf.Name); err != nil {
		errs = append(errs, err)
	}
	if err := ipam.Del(context.TODO(), conf.IPAM.Type, args.StdinData); err != nil {
		errs = append(errs, fmt.Errorf("ipam %s DEL: %w", conf.IPAM.Type, err))
	}
	return errors.Join(errs...)
}

// deleteVeth removes the pair through the container end when the namespace
// is reachable, then the host end by name: an ADD from upstream has a
// random host name (its container end's removal takes it along), and a
// namespace unmounted but still alive keeps the pair until the host end
// goes. Either end is deleted only when it is ours (see
// ip.DeleteContainerVeth, ip.DeleteOwnedVeth): an eth0 another plugin made
// and a host link that got the same hashed name later stay.
func deleteVeth(args *skel.CmdArgs, network string) error {
	var errs []error
	alias := ip.AttachmentAlias(args.ContainerID, args.IfName)
	if _, err := ip.DeleteContainerVeth(args.Netns, args.IfName, alias); err != nil {
		errs = append(errs, err)
	}
	hostNS, hostH, err := ns.OpenHost()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	defer hostNS.Close()
	defer hostH.Close()
	name := hostVethName(network, args.ContainerID, args.IfName)
	if err := ip.DeleteOwnedVeth(hostH, name, alias); err != nil {
		errs = append(errs, fmt.Errorf("in %s: %w", hostNS.Path(), err))
	}
	return errors.Join(errs...)
}
