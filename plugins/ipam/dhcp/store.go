package dhcp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// record is one attachment's lease as persisted in the state dir, one file
// per client ID (<statedir>/<sha256(clientID)[:16]>.json), written with
// write + rename before the ADD's result is returned.
type record struct {
	ClientID    string `json:"clientID"`
	ContainerID string `json:"containerID"`
	Network     string `json:"network"`
	IfName      string `json:"ifName"`
	Netns       string `json:"netns"` // as the plugin sent it (no host prefix)
	CNIArgs     string `json:"cniArgs,omitempty"`
	Stdin       []byte `json:"stdin"` // the netconf of the ADD, for renewals
	V4          *v4Rec `json:"v4,omitempty"`
	V6          *v6Rec `json:"v6,omitempty"`
}

// v4Rec keeps the DHCPv4 packets a renewal and a RELEASE are built from.
type v4Rec struct {
	Offer    []byte    `json:"offer"`
	ACK      []byte    `json:"ack"`
	Acquired time.Time `json:"acquired"` // when ACK arrived: T1, T2 and expiry count from it
}

// v6Rec keeps the DHCPv6 Reply a renewal and a Release are built from.
type v6Rec struct {
	Reply    []byte    `json:"reply"`
	Acquired time.Time `json:"acquired"`
}

func recordPath(dir, id string) string {
	sum := sha256.Sum256([]byte(id))
	return filepath.Join(dir, hex.EncodeToString(sum[:8])+".json")
}

func saveRecord(dir string, r *record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return writeFileAtomic(recordPath(dir, r.ClientID), b, 0o600)
}

func removeRecord(dir, id string) error {
	err := os.Remove(recordPath(dir, id))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// loadRecords reads every lease file in dir. A file that does not parse is
// reported and skipped: one corrupt file must not cost every other lease.
func loadRecords(dir string) ([]*record, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []*record
	var errs []error
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var r record
		if err := json.Unmarshal(b, &r); err != nil || r.ClientID == "" {
			errs = append(errs, fmt.Errorf("%s: not a lease record: %v", p, err))
			continue
		}
		out = append(out, &r)
	}
	return out, errors.Join(errs...)
}

// writeFileAtomic writes b to path through a temporary file in the same
// folder, synced and renamed, so a crash leaves the old file or the new one.
func writeFileAtomic(path string, b []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(path)+"-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename there is nothing left to remove
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // best effort: the rename is durable on most filesystems without it
		d.Close()
	}
	return nil
}
