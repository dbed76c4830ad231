package tap

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/ns"
)

// tapSpec is what the tun ioctls set when the tap is made.
type tapSpec struct {
	name           string
	multiQueue     bool
	owner, group   *uint32
	selinuxContext string
}

// selinuxEnforceFile exists when SELinux is on (selinuxfs mounted).
const selinuxEnforceFile = "/sys/fs/selinux/enforce"

// createTap makes a persistent tap in n through /dev/net/tun, as `ip tuntap
// add mode tap` would, without exec. The tun device is created in the
// namespace of the thread that opens /dev/net/tun, and the SELinux label of
// the tun socket is that thread's context, so it runs on a thread of its
// own that enters n (and takes the label) and is never handed back to the
// Go scheduler: the thread dies with the goroutine, its namespace and
// label with it.
//
// IFF_TUN_EXCL makes the kernel refuse (EBUSY) a name that is already a
// tap, where it would otherwise attach to it; a name that is another kind
// of link is EINVAL. IFF_NO_PI is ip tuntap's default, and the VMM sets
// the flags it needs (vnet_hdr) when it opens the tap.
func createTap(n *ns.NetNS, s tapSpec, selinuxOn bool) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		var err error
		defer func() { errc <- err }()
		// A panic here would pass every recover of the caller's goroutine.
		defer func() {
			if v := recover(); v != nil {
				err = fmt.Errorf("panic in netns %s: %v", n.Path(), v)
			}
		}()
		err = createTapHere(n, s, selinuxOn)
	}()
	return <-errc
}

func createTapHere(n *ns.NetNS, s tapSpec, selinuxOn bool) error {
	if err := unix.Setns(int(n.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("enter netns %s: %w", n.Path(), err)
	}
	if s.selinuxContext != "" && selinuxOn {
		if err := os.WriteFile("/proc/thread-self/attr/current", []byte(s.selinuxContext), 0); err != nil {
			return fmt.Errorf("selinuxContext: set %q for the tun socket: %w", s.selinuxContext, err)
		}
	}
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open /dev/net/tun: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(s.name)
	if err != nil {
		return fmt.Errorf("tap name %q: %w", s.name, err)
	}
	flags := uint16(unix.IFF_TAP | unix.IFF_NO_PI | unix.IFF_TUN_EXCL)
	if s.multiQueue {
		flags |= unix.IFF_MULTI_QUEUE
	}
	ifr.SetUint16(flags)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		if errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("create tap %q in %s: a link of that name exists: %w", s.name, n.Path(), err)
		}
		return fmt.Errorf("create tap %q in %s: %w", s.name, n.Path(), err)
	}
	if got := strings.TrimRight(ifr.Name(), "\x00"); got != s.name {
		return fmt.Errorf("create tap %q in %s: the kernel named it %q", s.name, n.Path(), got)
	}
	// From here the device exists, but only while fd is open: until
	// TUNSETPERSIST succeeds, closing fd (the deferred Close) removes it,
	// so a failure below leaves nothing.
	if s.owner != nil {
		if err := unix.IoctlSetInt(fd, unix.TUNSETOWNER, int(*s.owner)); err != nil {
			return fmt.Errorf("owner: set %d on tap %q: %w", *s.owner, s.name, err)
		}
	}
	if s.group != nil {
		if err := unix.IoctlSetInt(fd, unix.TUNSETGROUP, int(*s.group)); err != nil {
			return fmt.Errorf("group: set %d on tap %q: %w", *s.group, s.name, err)
		}
	}
	if err := unix.IoctlSetInt(fd, unix.TUNSETPERSIST, 1); err != nil {
		return fmt.Errorf("make tap %q persistent: %w", s.name, err)
	}
	return nil
}

// selinuxEnabled reports whether SELinux is on: selinuxfs is mounted.
func selinuxEnabled() bool {
	_, err := os.Stat(selinuxEnforceFile)
	return err == nil
}
