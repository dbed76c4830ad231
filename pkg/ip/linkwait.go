package ip

import (
	"errors"
	"fmt"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
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
func WaitLink(nsFd int, index int, cond func(netlink.Link) bool, timeout time.Duration) (netlink.Link, error) {
	nsh := netns.NsHandle(nsFd)
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		return nil, fmt.Errorf("netlink handle: %w", err)
	}
	defer h.Close()

	updates := make(chan netlink.LinkUpdate, 64)
	done := make(chan struct{})
	defer close(done)
	errc := make(chan error, 1)
	err = netlink.LinkSubscribeWithOptions(updates, done, netlink.LinkSubscribeOptions{
		Namespace: &nsh,
		ErrorCallback: func(err error) {
			select {
			case errc <- err:
			default:
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe to link events: %w", err)
	}

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
