package tuning

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ns"
)

// del restores what the state file holds and removes it. Without the
// namespace, or without the link, there is nothing to restore: it only
// removes the file. A restore that fails keeps the file for the retry.
func del(a *attach.Attachment, c *netConf) []error {
	p := statePath(c.DataDir, a.Args.ContainerID, a.Args.IfName)
	st, err := readState(p)
	if err != nil {
		// A file no suite can read restores nothing: dropping it is all
		// DEL can do, and keeping it would fail every retry.
		a.Log.Warn("dropping unreadable state file", "file", p, "err", err)
		return []error{removeState(p)}
	}
	if st == nil {
		// An ADD killed between writing the temp file and renaming it:
		// the temp file, when whole, is the state (issue 14).
		if st, err = readState(tmpPath(p)); err != nil || st == nil {
			return []error{removeState(p)}
		}
	}
	if a.Args.Netns == "" {
		return []error{removeState(p)}
	}
	contNS, err := ns.Open(a.Args.Netns)
	if err != nil {
		return []error{removeState(p)} // the namespace is gone, and what was in it
	}
	defer contNS.Close()
	h, err := contNS.Handle()
	if err != nil {
		return []error{fmt.Errorf("in %s: %w", contNS.Path(), err)}
	}
	defer h.Close()
	var errs []error
	if err := restoreLink(h, a.Args.IfName, st); err != nil {
		errs = append(errs, fmt.Errorf("in %s: %w", contNS.Path(), err))
	}
	for _, k := range sortedKeys(st.SysCtl) {
		if !validStatePath(k) {
			continue // not a sysctl we would have written
		}
		if err := writeSysctl(contNS, k, st.SysCtl[k]); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return []error{removeState(p)}
}

// validStatePath reports whether a sysctl path read from a state file
// stays under /proc/sys/net: the file is input too.
func validStatePath(p string) bool {
	clean := filepath.Clean("/" + p)
	return strings.HasPrefix(clean, "/net/") && clean[1:] == p
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
