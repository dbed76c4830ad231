package ip

import (
	"errors"
	"fmt"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/ns"
)

// ErrWaitTimeout is returned (wrapped) by WaitLink when the deadline passes
// before the link reaches the wanted state.
var ErrWaitTimeout = errors.New("timed out waiting for link")

// ErrLinkGone is returned (wrapped) by WaitLink when the link is deleted
// while waited for.
var ErrLinkGone = errors.New("link deleted while waiting")

// WaitLink waits until cond holds for the link with ifindex index in the
// network namespace nsFd (the fd of an open netns, e.g. ns.NetNS.Fd()), and
// returns the link as last seen. It subscribes to the namespace's link
// notifications before it reads the current state, so a change between the
// two is never missed, and it wakes on kernel events instead of polling:
// the common case (already true) costs one netlink dump of one link.
//
// Used where the kernel applies a change asynchronously: a veth's operstate
// turns up only when linkwatch has run (up to a second after both ends are
// up, on a busy host), and until then its qdisc drops every packet.
//
// It may run on any thread, in any namespace: its sockets are made inside
// ns.NetNS.Do, and the calling thread is never switched.
func WaitLink(nsFd int, index int, cond func(netlink.Link) bool, timeout time.Duration) (netlink.Link, error) {
	updates := make(chan netlink.LinkUpdate, 64)
	done := make(chan struct{})
	defer close(done)
	errc := make(chan error, 1)
	h, err := routeSocketsIn(nsFd, func() error {
		return netlink.LinkSubscribeWithOptions(updates, done, netlink.LinkSubscribeOptions{
			ErrorCallback: func(err error) {
				select {
				case errc <- err:
				default:
				}
			},
		})
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe to link events: %w", err)
	}
	defer h.Close()

	link, err := h.LinkByIndex(index)
	if err != nil {
		return nil, fmt.Errorf("link #%d: %w", index, err)
	}
	if cond(link) {
		return link, nil
	}

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case u, ok := <-updates:
			if !ok {
				// The subscription ended (socket error): read the state once
				// more rather than give up on a link that may be ready.
				if l, lerr := h.LinkByIndex(index); lerr == nil && cond(l) {
					return l, nil
				}
				return link, fmt.Errorf("link #%d: subscription ended: %w", index, errFrom(errc))
			}
			if int(u.Index) != index {
				continue
			}
			if u.Header.Type == unix.RTM_DELLINK {
				return nil, fmt.Errorf("link %q (#%d): %w", link.Attrs().Name, index, ErrLinkGone)
			}
			link = u.Link
			if cond(link) {
				return link, nil
			}
		case <-timer.C:
			return link, fmt.Errorf("link %q (#%d) after %s: %w", link.Attrs().Name, index, timeout, ErrWaitTimeout)
		}
	}
}

// routeSocketsIn makes, inside the namespace nsFd refers to, a
// NETLINK_ROUTE handle and whatever sockets subscribe opens (a socket
// belongs to the namespace it was created in, for life), and returns the
// handle. Both are made in ns.NetNS.Do, on a thread of their own: netlink's
// own ...At functions (NewHandleAt, the Namespace of the Subscribe options)
// switch the calling thread, which then may go back to the scheduler in
// the wrong namespace: they do not notice when switching back fails.
func routeSocketsIn(nsFd int, subscribe func() error) (*netlink.Handle, error) {
	n, err := ns.FromFd(nsFd)
	if err != nil {
		return nil, err
	}
	defer n.Close()
	var h *netlink.Handle
	err = n.Do(func() error {
		var err error
		if h, err = netlink.NewHandle(unix.NETLINK_ROUTE); err != nil {
			return fmt.Errorf("netlink handle: %w", err)
		}
		if err := subscribe(); err != nil {
			h.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("in %s: %w", n.Path(), err)
	}
	return h, nil
}

func errFrom(c chan error) error {
	select {
	case err := <-c:
		return err
	default:
		return nil
	}
}

// OperUp reports whether l's operational state is up, the condition a veth
// reaches once both ends are up and linkwatch has activated its qdisc.
func OperUp(l netlink.Link) bool {
	return l.Attrs().OperState == netlink.OperUp
}
