package hostdevice

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/result"
	"github.com/cniforge/plugins/pkg/rollback"
)

// findDevice finds the link the selector names in the host namespace
// (hostH): by name, by MAC, or the first of names (from sysfs) that is a
// link there. Not found is a config error (7) naming key, value and
// namespace.
func findDevice(hostNS *ns.NetNS, hostH *netlink.Handle, s selector, names []string) (netlink.Link, error) {
	notFound := func() error {
		return result.InvalidConfig(fmt.Errorf("%s: %q: no such device in the host network namespace (%s)", s.key, s.value, hostNS.Path()))
	}
	switch s.key {
	case keyDevice:
		l, err := ip.LinkByName(hostH, s.value)
		if errors.Is(err, ip.ErrLinkNotFound) {
			return nil, notFound()
		}
		return l, err
	case keyHWAddr:
		links, err := ip.LinkList(hostH)
		if err != nil {
			return nil, fmt.Errorf("in %s: %w", hostNS.Path(), err)
		}
		for _, l := range links {
			if strings.EqualFold(l.Attrs().HardwareAddr.String(), s.mac.String()) {
				return l, nil
			}
		}
		return nil, notFound()
	default:
		for _, name := range names {
			l, err := ip.LinkByName(hostH, name)
			if err == nil {
				return l, nil
			}
			if !errors.Is(err, ip.ErrLinkNotFound) {
				return nil, fmt.Errorf("in %s: %w", hostNS.Path(), err)
			}
		}
		return nil, result.InvalidConfig(fmt.Errorf("%s: %q: its interface %s is not in the host network namespace (%s)", s.key, s.value, strings.Join(names, ", "), hostNS.Path()))
	}
}

// tempName is the interface name the attachment's device carries between
// two namespaces, so that its name in neither collides with a link in the
// other: "hd" and a hash of container ID and ifname. It is the
// attachment's own, so a DEL after an ADD (or a DEL) that was killed
// midway finds the device under it, and no other attachment's DEL touches
// it.
func tempName(containerID, ifName string) string {
	sum := sha256.Sum256([]byte(containerID + "\x00" + ifName))
	return "hd" + hex.EncodeToString(sum[:])[:13]
}

// moveIn moves dev from the host namespace into the container as ifName:
// down (a link is renamed only when down), its original name written into
// its alias, renamed to the temporary name tmp, into the container,
// renamed to ifName, up again when it was up. The alias is written first,
// so that wherever a killed ADD leaves the device, DEL knows its name.
// Each change pushes its undo onto undo as soon as it is made. It returns
// the device as the container sees it.
func moveIn(hostNS *ns.NetNS, hostH *netlink.Handle, contNS *ns.NetNS, contH *netlink.Handle, dev netlink.Link, ifName, tmp string, undo *rollback.Stack) (netlink.Link, error) {
	orig, origAlias := dev.Attrs().Name, dev.Attrs().Alias
	wasUp := dev.Attrs().Flags&net.FlagUp != 0
	if err := hostH.LinkSetDown(dev); err != nil {
		return nil, fmt.Errorf("set %q down in %s: %w", orig, hostNS.Path(), err)
	}
	if wasUp {
		undo.Push("set "+orig+" up", func() error { return setUpByName(hostH, orig) })
	}
	if err := hostH.LinkSetAlias(dev, orig); err != nil {
		return nil, fmt.Errorf("keep the name %q in the alias of %q in %s: %w", orig, orig, hostNS.Path(), err)
	}
	undo.Push("restore the alias of "+orig, func() error { return setAliasByName(hostH, orig, origAlias) })
	if err := hostH.LinkSetName(dev, tmp); err != nil {
		return nil, fmt.Errorf("rename %q to %q in %s: %w", orig, tmp, hostNS.Path(), err)
	}
	undo.Push("rename "+tmp+" back to "+orig, func() error { return renameByName(hostH, tmp, orig) })
	if err := hostH.LinkSetNsFd(dev, int(contNS.Fd())); err != nil {
		return nil, fmt.Errorf("move %q (%q) from %s to %s: %w", orig, tmp, hostNS.Path(), contNS.Path(), err)
	}
	undo.Push("move "+tmp+" back", func() error { return moveToHost(contH, hostNS, tmp) })
	l, err := ip.LinkByName(contH, tmp)
	if err != nil {
		return nil, fmt.Errorf("in %s: %w", contNS.Path(), err)
	}
	if err := contH.LinkSetName(l, ifName); err != nil {
		return nil, fmt.Errorf("rename %q (%q) to %q in %s: %w", tmp, orig, ifName, contNS.Path(), err)
	}
	undo.Push("rename "+ifName+" back to "+tmp, func() error { return renameByName(contH, ifName, tmp) })
	if wasUp {
		if err := setUpByName(contH, ifName); err != nil {
			return nil, fmt.Errorf("in %s: %w", contNS.Path(), err)
		}
		// The undo of the rename sets it down first.
	}
	return ip.LinkByName(contH, ifName)
}

// moveOut returns the device ifName in the container to the host under the
// name its alias keeps, through a temporary name, and clears the alias. A
// missing device is success; so is a link whose alias is not an interface
// name (not a device this plugin, or upstream's, moved in: a veth another
// plugin made carries "cni:..."). When the original name is taken in the
// host, the device stays in the container and the error names both, so a
// later DEL can finish.
func moveOut(contNS *ns.NetNS, contH *netlink.Handle, hostNS *ns.NetNS, hostH *netlink.Handle, ifName, tmp string) error {
	l, orig, err := aliased(contNS, contH, ifName)
	if err != nil || l == nil {
		return err
	}
	if _, err := ip.LinkByName(hostH, orig); err == nil {
		return fmt.Errorf("cannot return %q in %s to %s as %q: a link of that name exists there", ifName, contNS.Path(), hostNS.Path(), orig)
	} else if !errors.Is(err, ip.ErrLinkNotFound) {
		return fmt.Errorf("in %s: %w", hostNS.Path(), err)
	}
	if err := contH.LinkSetDown(l); err != nil {
		return fmt.Errorf("set %q down in %s: %w", ifName, contNS.Path(), err)
	}
	if err := contH.LinkSetName(l, tmp); err != nil {
		return fmt.Errorf("rename %q to %q in %s: %w", ifName, tmp, contNS.Path(), err)
	}
	if err := contH.LinkSetNsFd(l, int(hostNS.Fd())); err != nil {
		// Back under its name, so that DEL can be retried.
		_ = renameByName(contH, tmp, ifName) // best effort: the move error is the one to report
		return fmt.Errorf("move %q from %s to %s: %w", ifName, contNS.Path(), hostNS.Path(), err)
	}
	hl, err := ip.LinkByName(hostH, tmp)
	if err != nil {
		return fmt.Errorf("in %s: %w", hostNS.Path(), err)
	}
	return restoreName(hostNS, hostH, hl, tmp, orig)
}

// aliased looks name up in n (h bound to it) and returns the link with
// the original name its alias keeps (ADD writes it before the rename). The
// link is nil when it is gone, or when its alias is not an interface name:
// not a device this plugin, or upstream's, moved in (a veth another plugin
// made carries "cni:...").
func aliased(n *ns.NetNS, h *netlink.Handle, name string) (netlink.Link, string, error) {
	l, err := ip.LinkByName(h, name)
	if errors.Is(err, ip.ErrLinkNotFound) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("in %s: %w", n.Path(), err)
	}
	orig := l.Attrs().Alias
	if attach.ValidateIfName("alias", orig) != nil {
		return nil, "", nil
	}
	return l, orig, nil
}

// restoreName gives l, in the host under the temporary name tmp, its
// original name orig back and clears the alias that kept it.
func restoreName(hostNS *ns.NetNS, hostH *netlink.Handle, l netlink.Link, tmp, orig string) error {
	if err := hostH.LinkSetName(l, orig); err != nil {
		return fmt.Errorf("rename %q back to %q in %s: %w", tmp, orig, hostNS.Path(), err)
	}
	if err := hostH.LinkSetAlias(l, ""); err != nil {
		return fmt.Errorf("clear the alias of %q in %s: %w", orig, hostNS.Path(), err)
	}
	return nil
}

// moveToHost moves the link name in contH's namespace to hostNS (the undo
// of the move). Gone is success.
func moveToHost(contH *netlink.Handle, hostNS *ns.NetNS, name string) error {
	l, err := ip.LinkByName(contH, name)
	if errors.Is(err, ip.ErrLinkNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return contH.LinkSetNsFd(l, int(hostNS.Fd()))
}

// renameByName renames from to to, setting the link down first.
func renameByName(h *netlink.Handle, from, to string) error {
	l, err := ip.LinkByName(h, from)
	if err != nil {
		return err
	}
	if err := h.LinkSetDown(l); err != nil {
		return fmt.Errorf("set %q down: %w", from, err)
	}
	if err := h.LinkSetName(l, to); err != nil {
		return fmt.Errorf("rename %q to %q: %w", from, to, err)
	}
	return nil
}

func setUpByName(h *netlink.Handle, name string) error {
	l, err := ip.LinkByName(h, name)
	if err != nil {
		return err
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("set %q up: %w", name, err)
	}
	return nil
}

func setAliasByName(h *netlink.Handle, name, alias string) error {
	l, err := ip.LinkByName(h, name)
	if err != nil {
		return err
	}
	return h.LinkSetAlias(l, alias)
}
