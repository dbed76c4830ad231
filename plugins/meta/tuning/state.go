package tuning

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
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

// keepOver is s (a state file an earlier ADD of the attachment wrote) with
// what n records and s does not: s holds the values from before any ADD.
func (s *state) keepOver(n *state) *state {
	out := *s
	if out.Mac == "" {
		out.Mac = n.Mac
	}
	if out.Promisc == nil {
		out.Promisc = n.Promisc
	}
	if out.Mtu == 0 {
		out.Mtu = n.Mtu
	}
	if out.Allmulti == nil {
		out.Allmulti = n.Allmulti
	}
	if out.TxQLen == nil {
		out.TxQLen = n.TxQLen
	}
	if len(n.SysCtl) > 0 {
		out.SysCtl = map[string]string{}
		for k, v := range n.SysCtl {
			out.SysCtl[k] = v
		}
		for k, v := range s.SysCtl {
			out.SysCtl[k] = v
		}
	}
	if out.Network == "" {
		out.Network = n.Network
	}
	return &out
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
	err = writeWhole(tmp, data)
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		_ = os.Remove(tmp) // best effort: DEL removes it too
		return fmt.Errorf("write state file %s: %w", p, err)
	}
	return nil
}

// stateStep, when set (by tests), is called after each step of
// writeWhole: "opened", once the file is open, before anything is written.
var stateStep func(step string)

// writeWhole makes name a file holding data, synced, that never exists
// under name with less: the data goes into an unnamed file (O_TMPFILE)
// that is linked to name only once written. A plugin killed before then
// leaves nothing; one killed after leaves a whole state, which DEL, and
// GC without the attachment, read and remove. (A temp file made under its
// name and then written could be left empty, naming no network: GC, which
// may share dataDir with other networks, could not tell whose it was.)
// Where the file system has no O_TMPFILE, the file is made under its name.
func writeWhole(name string, data []byte) error {
	f, err := os.OpenFile(filepath.Dir(name), unix.O_TMPFILE|os.O_WRONLY|unix.O_CLOEXEC, 0o600)
	named := errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL)
	if named {
		f, err = os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_CLOEXEC, 0o600)
	}
	if err != nil {
		return err
	}
	if stateStep != nil {
		stateStep("opened")
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if err == nil && !named {
		err = linkTmpFile(f, name)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// linkTmpFile gives the O_TMPFILE file f the name name, replacing a file
// an earlier, killed ADD left there.
func linkTmpFile(f *os.File, name string) error {
	if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	// AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH, which a plugin has as root;
	// the /proc path is the way without it.
	err := unix.Linkat(int(f.Fd()), "", unix.AT_FDCWD, name, unix.AT_EMPTY_PATH)
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOENT) {
		err = unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", f.Fd()), unix.AT_FDCWD, name, unix.AT_SYMLINK_FOLLOW)
	}
	if err != nil {
		return fmt.Errorf("link %s: %w", name, err)
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
