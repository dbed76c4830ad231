package bridge

import (
	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/netfilter/macspoof"
)

// del undoes ADD in reverse order, as independent steps: the frame tears
// masquerade down before them (both backends, whatever ipMasq says now)
// and releases IPAM after them. Everything already gone is success.
func del(fa *attach.Attachment, conf *config) []error {
	// Whatever macspoofchk says now: the ADD may have run with it. The
	// container namespace is opened by deleteVeth itself: a missing or
	// stale one is no reason to keep the other steps from running.
	spoof := fa.Beside(func() error { return macspoof.TeardownMacSpoofCheck(fa.Owner()) })
	var errs []error
	if a, err := wrap(fa, conf, false); err != nil {
		errs = append(errs, err)
	} else {
		errs = append(errs, a.deleteVeth())
	}
	return append(errs, <-spoof...)
}

// deleteVeth removes the veth pair. Deleting the container end removes the
// host end with it. When the container end cannot be reached (no netns,
// namespace gone, interface already deleted) the host end is looked up by
// the alias ADD gave it, in case it leaked. An interface of that name that
// is not ours (another plugin's eth0) is left alone.
func (a *attachment) deleteVeth() error {
	alias := a.Alias()
	if deleted, err := ip.DeleteContainerVeth(a.args.Netns, a.args.IfName, alias); err != nil || deleted {
		return err
	}
	return ip.DeleteVethsByAlias(a.hostH, alias)
}
