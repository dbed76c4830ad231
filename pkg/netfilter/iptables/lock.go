package iptables

import (
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cniforge/plugins/pkg/filelock"
)

// iptablesLockDir holds the locks of the attachment chains. Every change to
// a chain reads it with iptables-save and writes it back with
// iptables-restore; -w serialises only the write (and only with legacy
// iptables: iptables-nft takes no lock), so two interfaces of one container
// changing their shared chain at once could each write back a chain without
// the other's rules. A flock held across read and write serialises them:
// flock belongs to the open file description, so it works between
// processes and between goroutines that each open the file.
//
// Chains share iptablesLockBuckets lock files, picked by a hash of the
// chain name, so the directory never holds more than that many (issue 8:
// one file per chain grew by one per attachment, forever). Two chains in
// one bucket only wait for each other. Files are never removed: removing
// one while another process waits on it would let a third lock a new file
// at the same path. The lock is not per network namespace: chains of the
// same name in different namespaces only wait for each other.
const iptablesLockDir = "/run/cniforge/iptables"

// iptablesLockBuckets is the number of lock files chains share.
const IptablesLockBuckets = 256

// iptablesLockFile names the lock file of chain's bucket.
func IptablesLockFile(chain string) string {
	h := fnv.New32a()
	h.Write([]byte(chain)) // never fails
	return fmt.Sprintf("bucket-%02x.lock", h.Sum32()%IptablesLockBuckets)
}

// lockChains takes the locks of chains, waiting for whoever holds them,
// in the order of their file names and each bucket once (two chains of
// one bucket must not lock it twice: flock on a second open of the same
// file waits for the first). Only GC locks more than one bucket; taking
// them in one order keeps two GCs from waiting on each other. unlock
// releases them (closing the files is enough; a crashed holder releases
// them too).
func (m *Runner) LockChains(chains ...string) (unlock func(), err error) {
	dir := m.LockDir
	if dir == "" {
		dir = iptablesLockDir
	}
	what := "nat chain " + strings.Join(chains, ", ")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("lock %s: %w", what, err)
	}
	var names []string
	for _, c := range chains {
		names = append(names, IptablesLockFile(c))
	}
	slices.Sort(names)
	names = slices.Compact(names)
	var held []*os.File
	unlock = func() {
		for _, f := range slices.Backward(held) {
			f.Close()
		}
	}
	for _, name := range names {
		f, err := filelock.Lock(filepath.Join(dir, name), 0o600)
		if err != nil {
			unlock()
			return nil, fmt.Errorf("lock %s: %w", what, err)
		}
		held = append(held, f)
	}
	return unlock, nil
}
