package ip

import (
	"errors"
	"fmt"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ErrDADFailed is returned (wrapped) by WaitAddrsSettled when duplicate
// address detection found an address in use elsewhere.
var ErrDADFailed = errors.New("duplicate address detected")

// WaitAddrsSettled waits until no IPv6 address of the link with ifindex
// index in namespace nsFd is tentative, i.e. duplicate address detection has
// finished, woken by address events rather than polling. It is only needed
// when DAD was asked for: addresses added with IFA_F_NODAD are never
// tentative. Like WaitLink, it never switches the calling thread.
func WaitAddrsSettled(nsFd int, index int, timeout time.Duration) error {
	updates := make(chan netlink.AddrUpdate, 64)
	done := make(chan struct{})
	defer close(done)
	h, err := routeSocketsIn(nsFd, func() error {
		return netlink.AddrSubscribeWithOptions(updates, done, netlink.AddrSubscribeOptions{})
	})
	if err != nil {
		return fmt.Errorf("subscribe to address events: %w", err)
	}
	defer h.Close()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		// Re-read the whole list on every relevant event: an update says
		// little about the other addresses.
		addrs, err := AddrList(h, &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: index}}, netlink.FAMILY_V6)
		if err != nil {
			return err
		}
		tentative := 0
		for _, a := range addrs {
			if a.Flags&unix.IFA_F_DADFAILED != 0 {
				return fmt.Errorf("%s: %w", a.IPNet, ErrDADFailed)
			}
			if a.Flags&unix.IFA_F_TENTATIVE != 0 {
				tentative++
			}
		}
		if tentative == 0 {
			return nil
		}
	wait:
		for {
			select {
			case u, ok := <-updates:
				if !ok {
					return fmt.Errorf("link #%d: address subscription ended", index)
				}
				if u.LinkIndex == index {
					break wait
				}
			case <-timer.C:
				return fmt.Errorf("link #%d: %d address(es) still tentative after %s: %w", index, tentative, timeout, ErrWaitTimeout)
			}
		}
	}
}
