// Package ip holds link, address, route and sysctl helpers on netlink
// handles. Every function takes a *netlink.Handle bound to the namespace it
// works in (see ns.NetNS.Handle), so none depends on the calling thread's
// namespace unless it says so. It knows nothing about CNI config.
package ip

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ErrLinkNotFound is returned (wrapped) when a named link does not exist.
var ErrLinkNotFound = errors.New("link not found")

// dumpBudget bounds how long a list call retries a dump the kernel
// interrupted (NLM_F_DUMP_INTR: the table changed while it was read).
const dumpBudget = 2 * time.Second

// RetryDump calls fn (a netlink dump) until it returns a result the kernel
// did not interrupt, or the budget is spent (then the last error is
// returned): for dumps this package has no wrapper for.
func RetryDump[T any](what string, fn func() (T, error)) (T, error) {
	return retryDump(what, fn)
}

// retryDump calls fn until it returns a result the kernel did not interrupt,
// or the budget is spent (then the last error is returned).
func retryDump[T any](what string, fn func() (T, error)) (T, error) {
	deadline := time.Now().Add(dumpBudget)
	for {
		v, err := fn()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return v, err
		}
		if time.Now().After(deadline) {
			return v, fmt.Errorf("%s: dump interrupted repeatedly for %s: %w", what, dumpBudget, err)
		}
	}
}

// LinkByName looks up a link. A missing link yields an error wrapping
// ErrLinkNotFound.
func LinkByName(h *netlink.Handle, name string) (netlink.Link, error) {
	l, err := h.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) || errors.Is(err, unix.ENODEV) {
			return nil, fmt.Errorf("link %q: %w", name, ErrLinkNotFound)
		}
		return nil, fmt.Errorf("link %q: %w", name, err)
	}
	return l, nil
}

// LinkList lists every link, retrying interrupted dumps.
func LinkList(h *netlink.Handle) ([]netlink.Link, error) {
	return retryDump("list links", h.LinkList)
}

// AddrList lists the addresses of link (nil: of every link) in family
// (netlink.FAMILY_ALL, FAMILY_V4, FAMILY_V6), retrying interrupted dumps.
func AddrList(h *netlink.Handle, link netlink.Link, family int) ([]netlink.Addr, error) {
	return retryDump("list addresses", func() ([]netlink.Addr, error) { return h.AddrList(link, family) })
}

// RouteList lists the main-table routes of link (nil: every link) in
// family, retrying interrupted dumps.
func RouteList(h *netlink.Handle, link netlink.Link, family int) ([]netlink.Route, error) {
	return retryDump("list routes", func() ([]netlink.Route, error) { return h.RouteList(link, family) })
}

// RouteListFiltered lists routes matching filter, retrying interrupted dumps.
func RouteListFiltered(h *netlink.Handle, family int, filter *netlink.Route, mask uint64) ([]netlink.Route, error) {
	return retryDump("list routes", func() ([]netlink.Route, error) { return h.RouteListFiltered(family, filter, mask) })
}

// DelLinkByName deletes a link; a link that is already gone is success.
func DelLinkByName(h *netlink.Handle, name string) error {
	l, err := LinkByName(h, name)
	if errors.Is(err, ErrLinkNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := h.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("delete link %q: %w", name, err)
	}
	return nil
}

// AddrAdd adds addr to link; an identical address already there is success.
func AddrAdd(h *netlink.Handle, link netlink.Link, addr *netlink.Addr) error {
	if err := h.AddrAdd(link, addr); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("add %s to %q: %w", addr.IPNet, link.Attrs().Name, err)
	}
	return nil
}

// RouteAdd adds r; an identical route already there is success.
func RouteAdd(h *netlink.Handle, r *netlink.Route) error {
	if err := h.RouteAdd(r); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("add route %s: %w", RouteString(r), err)
	}
	return nil
}

// RouteString renders a route the way `ip route` would, for messages.
func RouteString(r *netlink.Route) string {
	var b strings.Builder
	if r.Dst == nil || isDefault(r.Dst) {
		b.WriteString("default")
	} else {
		b.WriteString(r.Dst.String())
	}
	if r.Gw != nil {
		fmt.Fprintf(&b, " via %s", r.Gw)
	}
	if r.LinkIndex != 0 {
		fmt.Fprintf(&b, " dev #%d", r.LinkIndex)
	}
	return b.String()
}

// Family returns netlink.FAMILY_V4 or FAMILY_V6 for ip.
func Family(ip net.IP) int {
	if ip.To4() != nil {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}

// SetSysctl writes value to /proc/sys/<name>, name in slashed form
// ("net/ipv4/conf/eth0/arp_notify": dotted names would break on interface
// names that contain dots, like "eth0.100"). /proc/sys/net belongs to the namespace of the thread that opens it,
// so call it inside ns.NetNS.Do for a namespace other than the caller's.
func SetSysctl(name, value string) error {
	p := filepath.Join("/proc/sys", name)
	if err := os.WriteFile(p, []byte(value), 0o644); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", name, value, err)
	}
	return nil
}

// GetSysctl reads /proc/sys/<name>; see SetSysctl for the namespace rule.
func GetSysctl(name string) (string, error) {
	p := filepath.Join("/proc/sys", name)
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("sysctl %s: %w", name, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// isDefault reports whether dst is 0.0.0.0/0 or ::/0; netlink reports a
// default route's destination that way rather than as nil.
func isDefault(dst *net.IPNet) bool {
	ones, _ := dst.Mask.Size()
	return ones == 0 && dst.IP.IsUnspecified()
}
