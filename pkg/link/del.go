package link

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ns"
)

// DeleteOwned deletes ifName in the namespace at nsPath when it is a link
// of kind tagged with alias, or untagged (an ADD of the other suite tags
// nothing). An empty or missing nsPath, a path that is no longer a network
// namespace, a missing link and a link that is not ours (another kind,
// another attachment's alias) are "nothing to delete". It does not depend
// on the calling thread's namespace.
func DeleteOwned(nsPath, ifName, kind, alias string) error {
	n, err := ns.OpenForDel(nsPath)
	if err != nil || n == nil {
		return err
	}
	defer n.Close()
	return DeleteOwnedIn(n.NetNS, n.H, ifName, kind, alias)
}

// DeleteOwnedIn is DeleteOwned in an open namespace n, h bound to it. It
// also deletes the link under its temporary name (TempName), which an ADD
// killed between creating and renaming it leaves behind.
func DeleteOwnedIn(n *ns.NetNS, h *netlink.Handle, ifName, kind, alias string) error {
	var errs []error
	for _, name := range []string{ifName, TempName(alias)} {
		if alias == "" && name != ifName {
			continue // a random name: nothing to find
		}
		l, err := ip.LinkByName(h, name)
		if errors.Is(err, ip.ErrLinkNotFound) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("in %s: %w", n.Path(), err))
			continue
		}
		if !Owned(l, kind, alias) {
			continue
		}
		if err := ip.DelLinkByName(h, name); err != nil {
			errs = append(errs, fmt.Errorf("in %s: %w", n.Path(), err))
		}
	}
	return errors.Join(errs...)
}

// Owned reports whether l is a link of kind DEL may delete for alias.
func Owned(l netlink.Link, kind, alias string) bool {
	if l.Type() != kind {
		return false
	}
	a := l.Attrs().Alias
	return a == alias || a == ""
}
