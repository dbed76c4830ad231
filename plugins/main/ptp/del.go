package ptp

import (
	"errors"
	"fmt"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
)

// del removes the veth pair; the frame tears masquerade down before it (on
// both backends, whatever the config says now) and releases IPAM after it.
func del(a *attach.Attachment, conf *netConf) []error {
	return []error{deleteVeth(a, conf.Name)}
}

// deleteVeth removes the pair through the container end when the namespace
// is reachable, then the host end by name: an ADD from upstream has a
// random host name (its container end's removal takes it along), and a
// namespace unmounted but still alive keeps the pair until the host end
// goes. Either end is deleted only when it is ours (see
// ip.DeleteContainerVeth, ip.DeleteOwnedVeth): an eth0 another plugin made
// and a host link that got the same hashed name later stay.
func deleteVeth(a *attach.Attachment, network string) error {
	var errs []error
	alias := a.Alias()
	if _, err := ip.DeleteContainerVeth(a.Args.Netns, a.Args.IfName, alias); err != nil {
		errs = append(errs, err)
	}
	hostNS, hostH, err := a.Host()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	name := hostVethName(network, a.Args.ContainerID, a.Args.IfName)
	if err := ip.DeleteOwnedVeth(hostH, name, alias); err != nil {
		errs = append(errs, fmt.Errorf("in %s: %w", hostNS.Path(), err))
	}
	return errors.Join(errs...)
}
