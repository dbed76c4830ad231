package node

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/plugins/light"
)

// cniforgeMark is in every cniforge binary, the separate plugin binaries
// included: the about text's format (pkg/plugin). A file without it is
// someone else's (upstream's plugins, a user's own) and install leaves it
// alone unless --force.
var cniforgeMark = []byte(" (cniforge): ")

// Install copies the running executable to <dir>/cniforge, and the light
// multicall cniforge-light from beside it to <dir>/cniforge-light, and
// makes every plugin name in dir a symlink: the plugins cniforge-light
// holds to it (they start cheaper there, issue 30), every other one to
// cniforge. Each file is written aside and renamed over its name, so a
// runtime exec'ing a plugin meanwhile sees the old file or the new one,
// never half of one; both binaries are in place before any link moves to
// them. Before anything is written, every name is checked: a file that is
// not cniforge's stops the install unless force.
//
// Without a cniforge-light beside the executable (a cniforge built or
// copied alone), every plugin is linked to cniforge, which holds them all,
// and install says so. One that is there but not cniforge's, or not of
// this version, stops the install: a stale file would otherwise run the
// light plugins at another version.
// Plugins are the names to link. It returns the exit status.
func Install(dir string, force bool, plugins []string, stdout, stderr io.Writer) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "cniforge install: find this executable: %v\n", err)
		return 1
	}
	src := sources{full: self}
	src.light, src.lightNames, err = findLight(filepath.Join(filepath.Dir(self), light.Binary), plugins)
	if err != nil {
		fmt.Fprintf(stderr, "cniforge install: %v; nothing installed\n", err)
		return 1
	}
	if src.light == "" {
		fmt.Fprintf(stdout, "no %s beside %s: every plugin linked to cniforge (the light plugins start costlier so)\n", light.Binary, self)
	}
	if err := runInstall(src, dir, plugins, force, stdout); err != nil {
		fmt.Fprintf(stderr, "cniforge install: %v\n", err)
		return 1
	}
	return 0
}

// sources are the binaries to install: the full multicall, and the light
// one ("" when there is none) with the plugins it holds.
type sources struct {
	full, light string
	lightNames  []string
}

// findLight returns the light multicall at path ("" if there is none) and
// the plugins it holds, as its `version` lists them. It must be
// cniforge's, of this suite's version, and hold only plugins the full
// multicall holds too.
func findLight(path string, all []string) (string, []string, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return "", nil, nil
	}
	ok, err := hasMark(path)
	if err != nil {
		return "", nil, err
	}
	if !ok {
		return "", nil, fmt.Errorf("%s is not cniforge's", path)
	}
	cmd := exec.Command(path, "version")
	cmd.Env = []string{} // no CNI_COMMAND: its command line, not a plugin call
	out, err := cmd.Output()
	if err != nil {
		return "", nil, fmt.Errorf("%s version: %w", path, err)
	}
	first, rest, _ := strings.Cut(string(out), "\n")
	if want := light.Binary + " " + plugin.SuiteVersion(); first != want {
		return "", nil, fmt.Errorf("%s is %q, not %q", path, first, want)
	}
	var names []string
	for _, line := range strings.Split(rest, "\n") {
		if l, ok := strings.CutPrefix(line, "plugins: "); ok {
			names = strings.Fields(l)
		}
	}
	if len(names) == 0 {
		return "", nil, fmt.Errorf("%s version lists no plugins", path)
	}
	for _, n := range names {
		if !slices.Contains(all, n) {
			return "", nil, fmt.Errorf("%s holds %q, which cniforge does not", path, n)
		}
	}
	return path, names, nil
}

// existing describes what a name in the target dir holds now.
type existing int

const (
	absent existing = iota
	ours
	foreign
)

func (e existing) String() string {
	return [...]string{"new", "replaced cniforge's", "replaced a file not cniforge's (--force)"}[e]
}

func runInstall(src sources, dir string, pluginNames []string, force bool, out io.Writer) error {
	binaries := []string{"cniforge"}
	if src.light != "" {
		binaries = append(binaries, light.Binary)
	}
	names := append(slices.Clone(binaries), pluginNames...)
	state := map[string]existing{}
	var refused []string
	for _, n := range names {
		st, err := classify(filepath.Join(dir, n))
		if err != nil {
			return err
		}
		state[n] = st
		if st == foreign && !force {
			refused = append(refused, n)
		}
	}
	if len(refused) > 0 {
		return fmt.Errorf("%s: %q not cniforge's; nothing installed (--force replaces them)", dir, refused)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// Both binaries first: a link renamed to one must find it whole.
	for _, b := range binaries {
		from := src.full
		if b == light.Binary {
			from = src.light
		}
		if err := copyAside(from, dir, b); err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: %s\n", filepath.Join(dir, b), state[b])
	}
	for _, n := range pluginNames {
		target := "cniforge"
		if slices.Contains(src.lightNames, n) {
			target = light.Binary
		}
		if err := symlinkAside(target, dir, n); err != nil {
			return err
		}
		fmt.Fprintf(out, "%s -> %s: %s\n", filepath.Join(dir, n), target, state[n])
	}
	return nil
}

// classify tells whether path is absent, cniforge's (a symlink to a
// cniforge binary or a cniforge binary) or anything else. Only a regular
// file is read, and only its first maxScan bytes: a FIFO named like a
// plugin would block a read forever, a link to /dev/zero never end one.
func classify(path string) (existing, error) {
	lst, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return absent, nil
	}
	if err != nil {
		return 0, err
	}
	if lst.IsDir() {
		return 0, fmt.Errorf("%s is a directory", path)
	}
	ok, err := hasMark(path)
	if err != nil {
		return 0, err
	}
	if ok {
		return ours, nil
	}
	return foreign, nil
}

// maxScan bounds how much of a file hasMark reads: several times a
// cniforge binary (about 5 MiB), whose mark lies in its data.
const maxScan = 64 << 20

// hasMark reports whether the file at path (a symlink followed) is a
// regular file holding cniforgeMark in its first maxScan bytes. Anything
// else (a dangling link, a FIFO, a device, a socket) is not cniforge's.
func hasMark(path string) (bool, error) {
	// A device is not even opened (opening some has effects: a tape
	// rewinds). The name can change meanwhile, so the open does not wait
	// either (O_NONBLOCK: a FIFO with no writer returns at once) and fstat
	// tells what was opened.
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return false, nil
	}
	f, err := openRegular(path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENXIO) || errors.Is(err, errNotRegular) {
		return false, nil // a dangling or looping link, a socket, a FIFO: not ours to judge
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	keep := len(cniforgeMark) - 1 // a mark split across two reads
	n, total := 0, 0
	for total < maxScan {
		m, err := f.Read(buf[n:])
		total += m
		n += m
		if bytes.Contains(buf[:n], cniforgeMark) {
			return true, nil
		}
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("read %s: %w", path, err)
		}
		if n > keep {
			copy(buf, buf[n-keep:n])
			n = keep
		}
	}
	return false, nil
}

// copyAside writes src to dir/.name.new, then renames it over dir/name.
func copyAside(src, dir, name string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(dir, "."+name+".new-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			_ = os.Remove(tmp.Name()) // best effort: only our own temp file
		}
	}()
	if _, err = io.Copy(tmp, in); err != nil {
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err = tmp.Chmod(0o755); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, name))
}

// symlinkAside makes dir/.name.new-* a symlink to target, then renames it
// over dir/name.
func symlinkAside(target, dir, name string) error {
	tmp, err := os.CreateTemp(dir, "."+name+".new-*")
	if err != nil {
		return err
	}
	tmpName := tmp.Name()
	tmp.Close()
	// A name of our own making (O_EXCL above), replaced by the symlink.
	if err := os.Remove(tmpName); err != nil {
		return err
	}
	if err := os.Symlink(target, tmpName); err != nil {
		return err
	}
	if err := os.Rename(tmpName, filepath.Join(dir, name)); err != nil {
		_ = os.Remove(tmpName) // best effort: only our own temp link
		return err
	}
	return nil
}
