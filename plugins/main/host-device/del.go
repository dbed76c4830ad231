package hostdevice

import (
	"errors"
	"fmt"
	"os"

	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ns"
)

// del moves the device back to the host under its original name; the frame
// releases IPAM after it. A namespace that is gone (empty path, missing,
// no longer a namespace) has nothing to return itself: the kernel
// destroyed a virtual device with it, and gave a physical one back to the
// root namespace under its container name, which DEL then renames to the
// original name its alias keeps (see renameFromAlias).
func (p *hostDevice) del(a *attach.Attachment, c *config) []error {
	hostNS, hostH, err := a.Host()
	if err != nil {
		return []error{err}
	}
	tmp := tempName(a.Args.ContainerID, a.Args.IfName)
	if err := p.delFromContainer(a, hostNS, hostH, tmp); err != nil {
		return []error{err}
	}
	// A device an ADD or DEL that was killed midway left in the host
	// under the attachment's temporary name.
	if err := renameFromAlias(hostNS, hostH, tmp); err != nil {
		return []error{err}
	}
	return []error{renameFromAlias(hostNS, hostH, a.Args.IfName)}
}

// delFromContainer returns the device to the host: CNI_IFNAME, and the
// attachment's temporary name (an ADD or DEL killed midway).
func (p *hostDevice) delFromContainer(a *attach.Attachment, hostNS *ns.NetNS, hostH *netlink.Handle, tmp string) error {
	if a.Args.Netns == "" {
		return nil
	}
	contNS, err := ns.Open(a.Args.Netns)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, ns.ErrNotNetNS) {
		return nil
	}
	if err != nil {
		return err
	}
	defer contNS.Close()
	contH, err := contNS.Handle()
	if err != nil {
		return err
	}
	defer contH.Close()
	if err := moveOut(contNS, contH, hostNS, hostH, a.Args.IfName, tmp); err != nil {
		return err
	}
	return moveToHost(contH, hostNS, tmp)
}

// renameFromAlias gives a device that came back to the host its original
// name: a link named ifName in the host whose alias is another interface
// name that is free is such a device (host-device, ours or upstream's,
// wrote the alias when it moved the device in). ifName is CNI_IFNAME (the
// kernel returned the device from a dead container under its container
// name) or the attachment's temporary name (a killed ADD or DEL left it).
// A device the kernel had to rename ("dev%d": its container name was taken
// in the root namespace) cannot be told from others and stays.
func renameFromAlias(hostNS *ns.NetNS, hostH *netlink.Handle, ifName string) error {
	l, err := ip.LinkByName(hostH, ifName)
	if errors.Is(err, ip.ErrLinkNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("in %s: %w", hostNS.Path(), err)
	}
	orig := l.Attrs().Alias
	if orig == ifName || attach.ValidateIfName("alias", orig) != nil {
		return nil
	}
	if _, err := ip.LinkByName(hostH, orig); err == nil {
		return nil // taken: not ours to rename over
	}
	if err := hostH.LinkSetDown(l); err != nil {
		return fmt.Errorf("set %q down in %s: %w", ifName, hostNS.Path(), err)
	}
	if err := hostH.LinkSetName(l, orig); err != nil {
		return fmt.Errorf("rename %q back to %q in %s: %w", ifName, orig, hostNS.Path(), err)
	}
	if err := hostH.LinkSetAlias(l, ""); err != nil {
		return fmt.Errorf("clear the alias of %q in %s: %w", orig, hostNS.Path(), err)
	}
	return nil
}
