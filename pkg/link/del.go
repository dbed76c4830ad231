package link

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
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
	wait, err := StartDeleteOwned(nsPath, ifName, kind, alias)
	return errors.Join(err, wait())
}

// Del is a link plugin's DEL of its attachment's link of kind (see
// DeleteOwned). It returns once the link is unregistered, and has the
// frame wait for the deletion requests after the IPAM release (see
// ip.StartDelLink, attach.Finally).
func Del(a *attach.Attachment, kind string) []error {
	wait, err := StartDeleteOwned(a.Args.Netns, a.Args.IfName, kind, a.Alias())
	a.Finally(wait)
	return []error{err}
}

// StartDeleteOwned is DeleteOwned that returns once the links are
// unregistered, before their deletion requests return; wait returns
// their errors. wait is never nil.
func StartDeleteOwned(nsPath, ifName, kind, alias string) (wait func() error, err error) {
	none := func() error { return nil }
	if nsPath == "" {
		return none, nil
	}
	n, err := ns.Open(nsPath)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, ns.ErrNotNetNS) {
		return none, nil
	}
	if err != nil {
		return none, err
	}
	defer n.Close()
	h, err := n.Handle()
	if err != nil {
		return none, err
	}
	waits, err := startDeleteOwnedIn(n, h, ifName, kind, alias)
	return sync.OnceValue(func() error {
		defer h.Close()
		var errs []error
		for _, w := range waits {
			errs = append(errs, w())
		}
		return errors.Join(errs...)
	}), err
}

// DeleteOwnedIn is DeleteOwned in an open namespace n, h bound to it. It
// also deletes the link under its temporary name (TempName), which an ADD
// killed between creating and renaming it leaves behind.
func DeleteOwnedIn(n *ns.NetNS, h *netlink.Handle, ifName, kind, alias string) error {
	waits, err := startDeleteOwnedIn(n, h, ifName, kind, alias)
	errs := []error{err}
	for _, w := range waits {
		errs = append(errs, w())
	}
	return errors.Join(errs...)
}

func startDeleteOwnedIn(n *ns.NetNS, h *netlink.Handle, ifName, kind, alias string) (waits []func() error, err error) {
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
		del := ip.StartDelLink(n, h, l)
		waits = append(waits, func() error {
			if err := del(); err != nil {
				return fmt.Errorf("in %s: %w", n.Path(), err)
			}
			return nil
		})
	}
	return waits, errors.Join(errs...)
}

// Owned reports whether l is a link of kind DEL may delete for alias.
func Owned(l netlink.Link, kind, alias string) bool {
	if l.Type() != kind {
		return false
	}
	a := l.Attrs().Alias
	return a == alias || a == ""
}
