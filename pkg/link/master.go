package link

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/result"
)

// ResolveMaster returns the master link name in n (h bound to it) or, when
// name is "", the interface of n's default route (IPv4 first, then IPv6).
// A missing master, or no default route to take one from, is code 7 naming
// the interface or saying to set "master". It changes nothing.
func ResolveMaster(n *ns.NetNS, h *netlink.Handle, name string) (netlink.Link, error) {
	if name == "" {
		l, err := defaultRouteLink(h)
		if err != nil {
			return nil, fmt.Errorf("in %s: %w", n.Path(), err)
		}
		if l == nil {
			return nil, result.InvalidConfig(fmt.Errorf("master: not set and %s has no default route to take it from; set \"master\"", n.Path()))
		}
		return l, nil
	}
	l, err := ip.LinkByName(h, name)
	if errors.Is(err, ip.ErrLinkNotFound) {
		return nil, result.InvalidConfig(fmt.Errorf("master: %q not found in %s", name, n.Path()))
	}
	if err != nil {
		return nil, fmt.Errorf("master %q in %s: %w", name, n.Path(), err)
	}
	return l, nil
}

// defaultRouteLink returns the link of the first default route of the main
// table, nil when there is none.
func defaultRouteLink(h *netlink.Handle) (netlink.Link, error) {
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		routes, err := ip.RouteListFiltered(h, fam, &netlink.Route{Table: 254}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return nil, err
		}
		for _, r := range routes {
			if r.Dst != nil {
				if ones, _ := r.Dst.Mask.Size(); ones != 0 {
					continue
				}
			}
			idx := r.LinkIndex
			if idx == 0 && len(r.MultiPath) > 0 {
				idx = r.MultiPath[0].LinkIndex
			}
			if idx == 0 {
				continue
			}
			l, err := h.LinkByIndex(idx)
			if err != nil {
				return nil, fmt.Errorf("link %d of the default route: %w", idx, err)
			}
			return l, nil
		}
	}
	return nil, nil
}

// CheckMasterMTU refuses (code 7, naming both numbers and the master) an
// mtu above the master's: the kernel would refuse the link, or a frame of
// that size could not leave through the master.
func CheckMasterMTU(mtu int, master netlink.Link) error {
	if mtu == 0 {
		return nil
	}
	if m := master.Attrs().MTU; mtu > m {
		return result.InvalidConfig(fmt.Errorf("mtu: %d is above the MTU %d of master %q", mtu, m, master.Attrs().Name))
	}
	return nil
}

// Master is the master link of an attachment and the namespace it lives in.
type Master struct {
	NS   *ns.NetNS
	H    *netlink.Handle
	Link netlink.Link
}

// ResolveMasterOf resolves the master of a's link before any change: in
// the host namespace, or in the container's with inContainer; name ""
// takes that namespace's default route interface. An mtu above the
// master's is refused (code 7, both numbers).
func ResolveMasterOf(a *attach.Attachment, inContainer bool, name string, mtu int) (*Master, error) {
	open := a.Host
	if inContainer {
		open = a.Container
	}
	n, h, err := open()
	if err != nil {
		return nil, err
	}
	l, err := ResolveMaster(n, h, name)
	if err != nil {
		return nil, err
	}
	if err := CheckMasterMTU(mtu, l); err != nil {
		return nil, err
	}
	return &Master{NS: n, H: h, Link: l}, nil
}
