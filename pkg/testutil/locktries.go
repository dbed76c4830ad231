package testutil

import (
	"github.com/onsi/gomega"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/ns"
)

// LockTries returns a step hook (attach.Hooks.AfterStep) that, after each
// step, tries n's lock (ns.NetNS.Lock: a flock on the namespace file) from
// another open of it without waiting, and ExpectHeld, which checks that
// every one of steps found it taken: an ADD that reads, then changes, the
// whole namespace's state (sbr's free table, vrf's VRF) holds the lock to
// its last change.
func LockTries(n *ns.NetNS) (hook func(string) error, expectHeld func(steps []string)) {
	tries := map[string]error{}
	hook = func(step string) error {
		o, err := ns.Open(n.Path())
		if err != nil {
			return err
		}
		defer o.Close() // releases the lock too, should the try get it
		tries[step] = unix.Flock(int(o.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		return nil
	}
	expectHeld = func(steps []string) {
		gomega.ExpectWithOffset(1, tries).To(gomega.HaveLen(len(steps)))
		for _, step := range steps {
			gomega.ExpectWithOffset(1, tries[step]).To(gomega.MatchError(unix.EWOULDBLOCK), "the lock was free after step %q", step)
		}
	}
	return hook, expectHeld
}
