package bandwidth

// The ifb: its name, group and alias (what DEL and GC know it by), and
// making it.

import (
	"crypto/sha512"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/ip"
)

// IfbName is the ifb device upstream names for an attachment: "bwp" and
// the hex of SHA-512(network name + container ID), 15 characters in all.
func IfbName(network, containerID string) string {
	sum := sha512.Sum512([]byte(network + containerID))
	return ("bwp" + hex.EncodeToString(sum[:]))[:15]
}

// IfbGroup is the link group (IFLA_GROUP) an ifb of network gets when it
// is made, in the same netlink message: the alias takes a second one, and
// an ADD killed between the two would leave an ifb GC could not tell as
// this network's (issue 14, kills mid-ADD). Never 0, the kernel's default
// group, which upstream's ifbs keep.
func IfbGroup(network string) uint32 {
	sum := sha512.Sum512([]byte("cni-bandwidth:" + network))
	return max(binary.BigEndian.Uint32(sum[:4]), 1)
}

// ifbAlias marks an ifb as this suite's, for the network (GC collects only
// its own network's: the name does not say which network it is of).
func ifbAlias(network, containerID string) string {
	return "cni-bandwidth:" + network + ":" + containerID
}

// ensureIfb makes the ifb, up, with the host end's MTU and upstream's
// queue length, in the network's link group, and marks it with the alias
// GC reads; made says whether it made it. An ifb already there has this
// attachment's name (network and container ID): an earlier ADD's, or one a
// killed ADD left. It is kept, so that a redirect to it stays valid, and
// brought in line.
func ensureIfb(h *netlink.Handle, name, alias string, group uint32, mtu int) (l netlink.Link, made bool, err error) {
	la := netlink.NewLinkAttrs()
	la.Name = name
	la.Group = group
	la.MTU = mtu
	la.TxQLen = 1000
	la.Flags = unix.IFF_UP
	err = h.LinkAdd(&netlink.Ifb{LinkAttrs: la})
	switch {
	case err == nil:
		made = true
	case !errors.Is(err, unix.EEXIST):
		return nil, false, fmt.Errorf("add ifb %q: %w", name, err)
	}
	l, err = ip.LinkByName(h, name)
	if err == nil && !made {
		err = alignIfb(h, l, group, mtu)
	}
	if err == nil && l.Attrs().Alias != alias {
		err = h.LinkSetAlias(l, alias)
	}
	if err == nil && l.Attrs().Flags&net.FlagUp == 0 {
		err = h.LinkSetUp(l)
	}
	if err != nil {
		if made {
			_ = ip.DelLinkByName(h, name) // best effort: the undo is not pushed yet
		}
		return nil, false, fmt.Errorf("ifb %q: %w", name, err)
	}
	return l, made, nil
}

// alignIfb gives an ifb that was there the group and MTU ADD makes one
// with.
func alignIfb(h *netlink.Handle, l netlink.Link, group uint32, mtu int) error {
	if l.Type() != "ifb" {
		return fmt.Errorf("exists, and is a %s, not an ifb", l.Type())
	}
	if l.Attrs().Group != group {
		if err := h.LinkSetGroup(l, int(group)); err != nil {
			return err
		}
	}
	if l.Attrs().MTU != mtu {
		return h.LinkSetMTU(l, mtu)
	}
	return nil
}
