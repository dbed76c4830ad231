package nftest

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/ns"
)

// inWithoutNetAdmin runs fn in n on a thread of its own whose effective
// capabilities lack CAP_NET_ADMIN, so that the kernel refuses every
// nf_tables request with EPERM: an error injected by the kernel itself,
// with the rules in place. Processes fn starts (iptables) get the
// capability back at exec, as root. The thread never returns to the
// scheduler.
func InWithoutNetAdmin(n *ns.NetNS, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if err := unix.Setns(int(n.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("enter %s: %w", n.Path(), err)
			return
		}
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			errc <- fmt.Errorf("capget: %w", err)
			return
		}
		data[unix.CAP_NET_ADMIN/32].Effective &^= 1 << (unix.CAP_NET_ADMIN % 32)
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			errc <- fmt.Errorf("capset: %w", err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}
