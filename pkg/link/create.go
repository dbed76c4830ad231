package link

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ns"
)

// CreateOptions is where Create makes a link and where it ends up.
type CreateOptions struct {
	// MasterNS and MasterH: the namespace the master lives in (the host's,
	// or the container's with linkInContainer), the link is created there.
	MasterNS *ns.NetNS
	MasterH  *netlink.Handle
	// ContNS and ContH: the container namespace, where the link ends up
	// named IfName. They may be the master's.
	ContNS *ns.NetNS
	ContH  *netlink.Handle
	IfName string
	// Alias tags the link as the attachment's (see DeleteOwned).
	Alias string
}

// randomName is a random temporary name: it cannot clash with
// CNI_IFNAME ("eth0") existing in the master's namespace.
func randomName() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b) // crypto/rand never fails on Linux
	return "cni" + hex.EncodeToString(b)
}

// TempName is the temporary name Create gives the link of the attachment
// alias tags, before renaming it to CNI_IFNAME: derived from alias, so
// that a DEL after an ADD killed between the two finds it (DeleteOwned).
// Without an alias it is random.
func TempName(alias string) string {
	if alias == "" {
		return randomName()
	}
	sum := sha256.Sum256([]byte(alias))
	return "cni" + hex.EncodeToString(sum[:4])
}

// Create adds l (its LinkAttrs filled in but for the name: ParentIndex,
// MTU, MAC, ...) on its master in opts.MasterNS under a temporary name
// (TempName), made directly in opts.ContNS when that is another namespace, tags
// it with opts.Alias and renames it to opts.IfName. It returns the link as the
// container sees it, down. On failure it deletes what it made, wherever
// it is by then, so the caller pushes its undo (DelLinkByName(ContH,
// IfName)) after success only. An IfName taken in the container is an
// error naming it.
func Create(l netlink.Link, opts CreateOptions) (netlink.Link, error) {
	same, err := opts.MasterNS.Same(opts.ContNS)
	if err != nil {
		return nil, err
	}
	la := l.Attrs()
	// h is where the link is made: with its master in another namespace,
	// directly in the container's (IFLA_NET_NS_FD, as `ip link add ...
	// netns` does). Moving a made link would cost the kernel an RCU grace
	// period (dev_change_net_namespace) on every ADD. Deleting it where it
	// is undoes everything.
	h, where := opts.MasterH, opts.MasterNS
	if !same {
		la.Namespace = netlink.NsFd(int(opts.ContNS.Fd()))
		h, where = opts.ContH, opts.ContNS
	}
	tmp := TempName(opts.Alias)
	for attempt := 0; ; attempt++ {
		la.Name = tmp
		err := opts.MasterH.LinkAdd(l)
		if err == nil {
			break
		}
		if errors.Is(err, unix.EEXIST) && attempt < 4 {
			if old, lerr := ip.LinkByName(h, tmp); lerr == nil {
				// Left by an ADD of this attachment killed before the
				// rename: ours to delete. Anything else: another name.
				if attempt == 0 && opts.Alias != "" && Owned(old, l.Type(), opts.Alias) {
					if derr := ip.DelLinkByName(h, tmp); derr != nil {
						return nil, fmt.Errorf("delete %q left by an earlier ADD in %s: %w", tmp, where.Path(), derr)
					}
					continue
				}
				tmp = randomName()
				continue
			}
			// Something else exists: a vlan of that ID on the master,
			// which no other name fixes.
		}
		return nil, fmt.Errorf("create %s link %q in %s: %w", l.Type(), tmp, opts.MasterNS.Path(), err)
	}
	fail := func(err error) (netlink.Link, error) {
		if derr := ip.DelLinkByName(h, tmp); derr != nil {
			err = errors.Join(err, fmt.Errorf("delete %q again in %s: %w", tmp, where.Path(), derr))
		}
		return nil, err
	}
	made, err := ip.LinkByName(h, tmp)
	if err != nil {
		return fail(fmt.Errorf("in %s: %w", where.Path(), err))
	}
	if opts.Alias != "" {
		if err := h.LinkSetAlias(made, opts.Alias); err != nil {
			return fail(fmt.Errorf("set alias of %q in %s: %w", tmp, where.Path(), err))
		}
	}
	if err := h.LinkSetName(made, opts.IfName); err != nil {
		if errors.Is(err, unix.EEXIST) {
			err = fmt.Errorf("%s already has an interface named %q: %w", where.Path(), opts.IfName, err)
		} else {
			err = fmt.Errorf("rename %q to %q in %s: %w", tmp, opts.IfName, where.Path(), err)
		}
		return fail(err)
	}
	tmp = opts.IfName // what fail deletes from here on
	out, err := ip.LinkByName(h, opts.IfName)
	if err != nil {
		return fail(fmt.Errorf("in %s: %w", where.Path(), err))
	}
	return out, nil
}
