package ip

import (
	"errors"
	"fmt"
	"os"

	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ns"
)

// AttachmentAlias is the alias a plugin gives both ends of an attachment's
// veth pair ("cni:<containerID>:<ifName>"), so DEL can tell its own links
// from links that only share a name: a hashed host name another attachment
// got later, or a container interface another plugin made.
func AttachmentAlias(containerID, ifName string) string {
	return "cni:" + containerID + ":" + ifName
}

// ownedVeth reports whether l is a veth DEL may delete for alias. With
// allowUntagged, a veth without an alias counts too: an ADD of the other
// suite (or an older one of ours) tags nothing, and DEL must still clean up
// after it.
func ownedVeth(l netlink.Link, alias string, allowUntagged bool) bool {
	if _, ok := l.(*netlink.Veth); !ok {
		return false
	}
	a := l.Attrs().Alias
	return a == alias || (allowUntagged && a == "")
}

// DeleteContainerVeth deletes ifName in the network namespace at nsPath when
// it is a veth tagged with alias, or an untagged veth (see ownedVeth);
// deleting it deletes its peer too. A missing nsPath, a path that is not a
// network namespace (a runtime's netns file left after the namespace was
// unmounted), a missing interface and an interface that is not ours are all
// "nothing to delete": deleted is false and err nil. It does not depend on
// the calling thread's namespace.
func DeleteContainerVeth(nsPath, ifName, alias string) (deleted bool, err error) {
	if nsPath == "" {
		return false, nil
	}
	contNS, err := ns.Open(nsPath)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, ns.ErrNotNetNS) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer contNS.Close()
	h, err := contNS.Handle()
	if err != nil {
		return false, err
	}
	defer h.Close()
	l, err := LinkByName(h, ifName)
	if errors.Is(err, ErrLinkNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("in %s: %w", nsPath, err)
	}
	if !ownedVeth(l, alias, true) {
		return false, nil
	}
	if err := DelLinkByName(h, ifName); err != nil {
		return false, fmt.Errorf("in %s: %w", nsPath, err)
	}
	return true, nil
}

// DeleteOwnedVeth deletes the link name in h's namespace only when it is a
// veth tagged with alias; absent or someone else's is success.
func DeleteOwnedVeth(h *netlink.Handle, name, alias string) error {
	l, err := LinkByName(h, name)
	if errors.Is(err, ErrLinkNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !ownedVeth(l, alias, false) {
		return nil
	}
	return DelLinkByName(h, name)
}

// DeleteVethsByAlias deletes every veth in h's namespace tagged with alias:
// the host end of a pair whose container end DEL could not reach.
func DeleteVethsByAlias(h *netlink.Handle, alias string) error {
	links, err := LinkList(h)
	if err != nil {
		return err
	}
	var errs []error
	for _, l := range links {
		if ownedVeth(l, alias, false) {
			errs = append(errs, DelLinkByName(h, l.Attrs().Name))
		}
	}
	return errors.Join(errs...)
}

// CheckNameFree refuses, changing nothing, an ifName that already names a
// link in the container: a plugin that moves or makes its link there under
// that name would fail half way, and one that runs IPAM first (ptp) would
// have its undo release what IPAM handed a live attachment again.
func CheckNameFree(contNS *ns.NetNS, contH *netlink.Handle, ifName string) error {
	if _, err := LinkByName(contH, ifName); err == nil {
		return fmt.Errorf("a link %q already exists in %s", ifName, contNS.Path())
	} else if !errors.Is(err, ErrLinkNotFound) {
		return fmt.Errorf("in %s: %w", contNS.Path(), err)
	}
	return nil
}
