package hostdevice

import (
	"fmt"

	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ns"
)

// del moves the device back to the host under its original name; the frame
// releases IPAM after it. A namespace that is gone (empty path, missing,
// no longer a namespace) has nothing to return: the kernel destroyed a
// virtual device with it, and gave a physical one back to the root
// namespace under its container name (or "dev%d"). DEL leaves that one as
// it is: by name and alias alone it cannot be told from a host link that
// happens to be called CNI_IFNAME and carry an alias, and renaming a
// host's uplink would be far worse than a device left under another name.
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
	return []error{renameFromAlias(hostNS, hostH, tmp)}
}

// delFromContainer returns the device to the host: CNI_IFNAME, and the
// attachment's temporary name (an ADD or DEL killed midway).
func (p *hostDevice) delFromContainer(a *attach.Attachment, hostNS *ns.NetNS, hostH *netlink.Handle, tmp string) error {
	contNS, err := ns.OpenForDel(a.Args.Netns)
	if err != nil || contNS == nil {
		return err
	}
	defer contNS.Close()
	contH := contNS.H
	if err := moveOut(contNS.NetNS, contH, hostNS, hostH, a.Args.IfName, tmp); err != nil {
		return err
	}
	return moveToHost(contH, hostNS, tmp)
}

// renameFromAlias gives the device a killed ADD or DEL left in the host
// under the attachment's temporary name tmp the name its alias keeps (ADD
// writes the alias before the rename), when that name is free.
func renameFromAlias(hostNS *ns.NetNS, hostH *netlink.Handle, tmp string) error {
	l, orig, err := aliased(hostNS, hostH, tmp)
	if err != nil || l == nil || orig == tmp {
		return err
	}
	if _, err := ip.LinkByName(hostH, orig); err == nil {
		return fmt.Errorf("cannot rename %q in %s back to %q: a link of that name exists there", tmp, hostNS.Path(), orig)
	}
	if err := hostH.LinkSetDown(l); err != nil {
		return fmt.Errorf("set %q down in %s: %w", tmp, hostNS.Path(), err)
	}
	return restoreName(hostNS, hostH, l, tmp, orig)
}
