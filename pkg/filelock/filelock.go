// Package filelock takes exclusive flock(2) locks on files: how plugin
// processes running at once on one node take turns on shared state (a
// host-local network's reservations, an iptables chain).
package filelock

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Lock opens path (creating it with perm) and takes an exclusive flock on
// it, waiting for the current holder. Closing the returned file releases
// the lock; the kernel releases a crashed holder's lock.
func Lock(path string, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, perm)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if _, err := Hold(int(f.Fd()), path); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Hold takes an exclusive flock on fd, an open file (a network namespace
// the plugin commands in it take turns on), waiting for the current
// holder; name says which file in the error. The returned func releases
// the lock; closing the file releases it too.
func Hold(fd int, name string) (func(), error) {
	for {
		// A signal can interrupt the wait; only then is it retried.
		err := unix.Flock(fd, unix.LOCK_EX)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EINTR) {
			return nil, fmt.Errorf("lock %s: %w", name, err)
		}
	}
	return func() { _ = unix.Flock(fd, unix.LOCK_UN) }, nil // best effort: closing the file releases it too
}
