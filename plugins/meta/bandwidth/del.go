package bandwidth

// DEL and GC: what bandwidth deletes, and how it knows it as its own.

import (
	"errors"
	"fmt"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/owner"
)

// del deletes the shaping ADD put on the host end, then the ifb by name
// (no netns and no prevResult needed: an upstream ADD's ifb has the same
// name). The host end is each veth prevResult lists as a host interface
// and, with or without prevResult, the peer of CNI_IFNAME when CNI_NETNS is
// still there: a DEL without prevResult must not leave the tbf that would
// fail the next ADD on that veth (issue 22). Usually the main plugin's DEL
// then deletes the veth, which takes the rest along.
func del(a *attach.Attachment, c *netConf) []error {
	hostNS, h, err := a.Host()
	if err != nil {
		return []error{err}
	}
	var errs []error
	for _, l := range delHostEnds(a, h) {
		if err := deleteShaping(h, l); err != nil {
			errs = append(errs, fmt.Errorf("in %s: %w", hostNS.Path(), err))
		}
	}
	// The ifb is the container's on this network, not the interface's
	// (upstream's name): a container with two interfaces on the network
	// (Multus can attach one network twice) has both redirected to it.
	// While the host end of another of its interfaces, known by the alias
	// bridge and ptp give it, still redirects to it, it stays. A host end
	// without that alias (upstream's, another plugin's) cannot be told
	// from this attachment's own when DEL has no prevResult and no netns
	// to find it: the ifb goes then, as upstream's DEL deletes it.
	ifbName := IfbName(c.Name, a.Args.ContainerID)
	user, err := ifbRedirectedFrom(h, ifbName, ip.AttachmentAlias(a.Args.ContainerID, ""), a.Alias())
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("in %s: %w", hostNS.Path(), err))
	case user != "":
		a.Log.Info("ifb kept: another interface of the container still redirects to it", "ifb", ifbName, "from", user)
	default:
		if err := ip.DelLinkByName(h, ifbName); err != nil {
			errs = append(errs, fmt.Errorf("in %s: %w", hostNS.Path(), err))
		}
	}
	return errs
}

// ifbRedirectedFrom names a link whose alias starts with sibling but is not
// self, and whose ingress hook still redirects to the ifb called name (""
// when there is none). Only the links with an ingress hook are read: one
// dump of every qdisc finds them.
func ifbRedirectedFrom(h *netlink.Handle, name, sibling, self string) (string, error) {
	ifb, err := ip.LinkByName(h, name)
	if errors.Is(err, ip.ErrLinkNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	qs, err := ip.RetryDump("list qdiscs", func() ([]netlink.Qdisc, error) { return h.QdiscList(nil) })
	if err != nil {
		return "", err
	}
	seen := map[int]bool{}
	for _, q := range qs {
		idx := q.Attrs().LinkIndex
		if q.Attrs().Parent != netlink.HANDLE_INGRESS || seen[idx] || idx == ifb.Attrs().Index {
			continue
		}
		seen[idx] = true
		l, err := h.LinkByIndex(idx)
		if err != nil || !strings.HasPrefix(l.Attrs().Alias, sibling) || l.Attrs().Alias == self {
			continue // gone meanwhile, not another interface's of the container
		}
		fs, err := bandwidthRedirects(h, l)
		if err != nil {
			return "", err
		}
		for _, f := range fs {
			if to, _ := redirectTarget(f); to == ifb.Attrs().Index {
				return l.Attrs().Name, nil
			}
		}
	}
	return "", nil
}

// delHostEnds finds the host ends DEL cleans: the host veths prevResult
// lists, and the veth peer of CNI_IFNAME. What cannot be read (no
// prevResult, the netns gone) is skipped: DEL does not fail on it.
func delHostEnds(a *attach.Attachment, h *netlink.Handle) []netlink.Link {
	var ends []netlink.Link
	seen := map[int]bool{}
	addEnd := func(l netlink.Link) {
		if l != nil && l.Type() == "veth" && !seen[l.Attrs().Index] {
			seen[l.Attrs().Index] = true
			ends = append(ends, l)
		}
	}
	if prev, err := a.Conf.Prev(); err == nil && prev != nil {
		for _, iface := range prev.Interfaces {
			if iface.Sandbox != "" || strings.HasPrefix(iface.Name, "bwp") {
				continue
			}
			if l, err := ip.LinkByName(h, iface.Name); err == nil {
				addEnd(l)
			}
		}
	}
	if a.Args.Netns == "" || a.Args.IfName == "" {
		return ends
	}
	if _, contH, err := a.Container(); err == nil {
		if cl, err := ip.LinkByName(contH, a.Args.IfName); err == nil {
			// The index is the peer's in its own namespace: the link with
			// it here is the peer only if it points back at cl.
			if peer, err := ip.PeerIndex(contH, cl); err == nil {
				if l, err := h.LinkByIndex(peer); err == nil && l.Attrs().ParentIndex == cl.Attrs().Index {
					addEnd(l)
				}
			}
		}
	}
	return ends
}

// deleteShaping deletes what ADD puts on a host end l: the root tbf, and
// bandwidth's redirect on the ingress hook, with the hook's qdisc when no
// other filter is left on it. Another tool's qdisc and filters stay.
func deleteShaping(h *netlink.Handle, l netlink.Link) error {
	qs, err := h.QdiscList(l)
	if err != nil {
		return fmt.Errorf("qdiscs of %q: %w", l.Attrs().Name, err)
	}
	var errs []error
	for _, q := range qs {
		if ownRoot(q) {
			if err := qdiscDel(h, q); err != nil {
				errs = append(errs, fmt.Errorf("%q: %w", l.Attrs().Name, err))
			}
		}
	}
	fs, err := bandwidthRedirects(h, l)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if len(fs) > 0 {
		if err := deleteRedirects(h, l); err != nil {
			errs = append(errs, err)
		} else if err := deleteIngressHookIfUnused(h, l); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// gc deletes the ifbs this suite made for network c.Name (by their alias,
// or, without one, by their link group) whose container is not in keep,
// and the shaping of the host end that redirects to one. Upstream's ifbs
// carry no alias and stay:
// their name does not say which network they belong to.
func gc(a *attach.Attachment, c *netConf, keep []owner.Owner) []error {
	hostNS, h, err := a.Host()
	if err != nil {
		return []error{err}
	}
	kept := map[string]bool{}
	for _, o := range keep {
		kept[ifbAlias(c.Name, o.ContainerID)] = true
	}
	links, err := ip.LinkList(h)
	if err != nil {
		return []error{fmt.Errorf("in %s: %w", hostNS.Path(), err)}
	}
	keptNames := map[string]bool{}
	for _, o := range keep {
		keptNames[IfbName(c.Name, o.ContainerID)] = true
	}
	var errs []error
	mine, group := ifbAlias(c.Name, ""), IfbGroup(c.Name)
	for _, l := range links {
		al, name := l.Attrs().Alias, l.Attrs().Name
		if l.Type() != "ifb" || !strings.HasPrefix(name, "bwp") {
			continue
		}
		switch {
		case al == "" && l.Attrs().Group == group:
			// An ADD killed between making the ifb and setting its alias:
			// the group says whose, the name whether a listed container's.
			if keptNames[name] {
				continue
			}
		case !strings.HasPrefix(al, mine) || kept[al]:
			continue
		case IfbName(c.Name, strings.TrimPrefix(al, mine)) != name:
			continue // an alias that does not match the name: not ours
		}
		// A host end still there (its container is gone, or its main
		// plugin kept it) loses the shaping that sends its traffic to the
		// ifb, and the tbf beside it. An ingress-only attachment has no
		// ifb, and GC cannot tell its tbf from an admin's.
		for _, hl := range links {
			if hl.Type() == "veth" && redirectsTo(h, hl, l.Attrs().Index) {
				a.Log.Info("gc: deleting shaping", "link", hl.Attrs().Name)
				if err := deleteShaping(h, hl); err != nil {
					errs = append(errs, fmt.Errorf("in %s: %w", hostNS.Path(), err))
				}
			}
		}
		a.Log.Info("gc: deleting ifb", "ifb", l.Attrs().Name)
		if err := ip.DelLinkByName(h, l.Attrs().Name); err != nil {
			errs = append(errs, fmt.Errorf("in %s: %w", hostNS.Path(), err))
		}
	}
	return errs
}
