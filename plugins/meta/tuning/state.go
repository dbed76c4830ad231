package tuning

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// state is what ADD changed, as it was before: upstream's configToRestore
// (its keys and meaning, so that either suite restores the other's), plus
// the old sysctl values and the network, which upstream ignores.
type state struct {
	Mac      string `json:"mac,omitempty"`
	Promisc  *bool  `json:"promisc,omitempty"`
	Mtu      int    `json:"mtu,omitempty"`
	Allmulti *bool  `json:"allmulti,omitempty"`
	TxQLen   *int   `json:"txQLen,omitempty"`

	// SysCtl maps a sysctl's path below /proc/sys to its old value.
	SysCtl map[string]string `json:"sysctl,omitempty"`
	// Network is the network name: GC collects only its own network's
	// files (dataDir may be shared, and upstream's files carry no name).
	Network string `json:"network,omitempty"`
}

// statePath is upstream's file: <dataDir>/<containerID>_<ifname>.json.
func statePath(dataDir, containerID, ifName string) string {
	return filepath.Join(dataDir, containerID+"_"+ifName+".json")
}

// writeState writes s to p atomically (a temporary file renamed over p),
// so that a DEL after a crash reads either nothing or all of it.
func writeState(p string, s *state) error {
	data, err := json.MarshalIndent(s, "", " ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("state dir %s: %w", dir, err)
	}
	// One temp name per attachment, not a random one: a plugin killed
	// before the rename leaves a file that DEL knows to remove.
	tmp := tmpPath(p)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("state file %s: %w", p, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		_ = os.Remove(tmp) // best effort: DEL removes it too
		return fmt.Errorf("write state file %s: %w", p, err)
	}
	return nil
}

// readState reads the state file p; (nil, nil) when there is none.
func readState(p string) (*state, error) {
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state file %s: %w", p, err)
	}
	s := &state{}
	if err := json.Unmarshal(data, s); err != nil {
		return nil, fmt.Errorf("state file %s: %w", p, err)
	}
	return s, nil
}

// tmpPath is where writeState writes p before renaming it over p.
func tmpPath(p string) string {
	return filepath.Join(filepath.Dir(p), tmpPrefix+filepath.Base(p))
}

const tmpPrefix = ".tmp-"

// removeState removes p and its temp file (left by an ADD killed while
// writing it, issue 14); a file already gone is success.
func removeState(p string) error {
	var errs []error
	for _, f := range []string{p, tmpPath(p)} {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove state file %s: %w", f, err))
		}
	}
	return errors.Join(errs...)
}
