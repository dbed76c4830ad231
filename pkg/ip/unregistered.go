package ip

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/ns"
)

// StartDelLink deletes l through h, whose namespace is n, and returns once
// the kernel has unregistered it: its addresses, routes and neighbours are
// gone, its name is free, and nothing of it is visible any more (a veth's
// peer went with it). That is 15-25 ms before the deletion request itself
// returns: every link deletion ends in an RCU barrier (netdev_run_todo)
// that waits for pending callbacks, not for the link. The kernel announces
// the unregistration (RTM_DELLINK to RTNLGRP_LINK) before that barrier,
// and StartDelLink listens for it in n. wait returns the request's error
// once it has returned, a link already gone being success; the caller
// calls it before it finishes (a DEL, after its IPAM release). When the
// announcement cannot be heard (no socket), StartDelLink waits for the
// request itself.
func StartDelLink(n *ns.NetNS, h *netlink.Handle, l netlink.Link) (wait func() error) {
	fd := -1
	_ = n.Do(func() error {
		var err error
		fd, err = linkEventSocket()
		return err
	})
	res := make(chan error, 1)
	go func() {
		err := h.LinkDel(l)
		if err != nil && !errors.Is(err, unix.ENODEV) && !errors.Is(err, unix.ENOENT) {
			err = fmt.Errorf("delete link %q: %w", l.Attrs().Name, err)
		} else {
			err = nil
		}
		res <- err
	}()
	wait = sync.OnceValue(func() error { return <-res })
	if fd < 0 {
		_ = wait()
		return wait
	}
	defer unix.Close(fd)
	awaitUnregistered(fd, l.Attrs().Index, res, wait)
	return wait
}

// linkEventSocket is a route netlink socket in the calling thread's
// namespace, joined to the link notifications.
func linkEventSocket() (int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: unix.RTMGRP_LINK}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// awaitUnregistered returns once fd hears RTM_DELLINK for index, or the
// request (res) has answered; on a socket error (an overrun, say) it waits
// for the request.
func awaitUnregistered(fd, index int, res <-chan error, wait func() error) {
	buf := make([]byte, 16<<10)
	for {
		if len(res) > 0 {
			_ = wait()
			return
		}
		// A short poll, so that a request answering first (an error, a
		// link already gone) is noticed without a notification.
		ready, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 2)
		if errors.Is(err, unix.EINTR) || err == nil && ready == 0 {
			continue
		}
		if err != nil {
			_ = wait()
			return
		}
		nr, _, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			_ = wait()
			return
		}
		if delLinkFor(buf[:nr], index) {
			return
		}
	}
}

// delLinkFor reports whether the netlink messages in b hold RTM_DELLINK for
// index (struct ifinfomsg: family, pad, type, then the index).
func delLinkFor(b []byte, index int) bool {
	msgs, err := syscall.ParseNetlinkMessage(b)
	if err != nil {
		return false
	}
	for _, m := range msgs {
		if m.Header.Type == unix.RTM_DELLINK && len(m.Data) >= unix.SizeofIfInfomsg &&
			int(int32(binary.NativeEndian.Uint32(m.Data[4:8]))) == index {
			return true
		}
	}
	return false
}
