package netfilter

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/cniforge/plugins/pkg/filelock"
)

// iptablesLockDir holds one lock file per attachment chain. Every change to
// a chain reads it with iptables-save and writes it back with
// iptables-restore; -w serialises only the write (and only with legacy
// iptables: iptables-nft takes no lock), so two interfaces of one container
// changing their shared chain at once could each write back a chain without
// the other's rules. A flock on <chain>.lock, held across read and write,
// serialises them: flock belongs to the open file description, so it works
// between processes and between goroutines that each open the file. Chain
// names are "CNI-" and hex digits, safe as file names. The lock is not per
// network namespace: chains of the same name in different namespaces only
// wait for each other. Lock files stay (empty, on tmpfs): removing one
// while another process waits on it would let a third lock a new file at
// the same path.
const iptablesLockDir = "/run/cniforge/iptables"

// lockIPTablesChain takes the lock of chain, waiting for whoever holds it.
// unlock releases it (closing the file is enough; a crashed holder releases
// it too).
func lockIPTablesChain(chain string) (unlock func(), err error) {
	if err := os.MkdirAll(iptablesLockDir, 0o700); err != nil {
		return nil, fmt.Errorf("lock nat chain %s: %w", chain, err)
	}
	f, err := filelock.Lock(filepath.Join(iptablesLockDir, chain+".lock"), 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock nat chain %s: %w", chain, err)
	}
	return func() { f.Close() }, nil
}
