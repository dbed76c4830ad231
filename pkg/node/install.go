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
	"github.com/cniforge/plugins/plugins/companion"
)

// cniforgeMark is in every cniforge binary, the separate plugin binaries
// included: the about text's format (pkg/plugin). A file without it is
// someone else's (upstream's plugins, a user's own) and install leaves it
// alone unless --force.
var cniforgeMark = []byte(" (cniforge): ")

// Install copies the running executable to <dir>/cniforge, and each
// companion multicall (plugins/companion: cniforge-light, cniforge-dhcp)
// from beside it to <dir>/<companion>, and makes every plugin name in dir a
// symlink: the plugins a companion holds to it (they start cheaper there,
// issue 30), every other one to cniforge. Each file is written aside and
// renamed over its name, so a runtime exec'ing a plugin meanwhile sees the
// old file or the new one, never half of one; every binary is in place
// before any link moves to it. Before anything is written, every name is
// checked: a file that is not cniforge's stops the install unless force.
//
// Without cniforge-light beside the executable (a cniforge built or copied
// alone), the light plugins are linked to cniforge, which holds them too;
// without cniforge-dhcp, dhcp (which cniforge does not hold) is not
// installed; install says so for each. A dhcp that an older install
// linked to cniforge, which no longer holds it, is removed then, and
// install says so: it would fail with "dhcp is in cniforge-dhcp". Any
// other dhcp (a binary of ours that still runs it for live pods' DELs, or
// one not cniforge's) is left as it is, even with force (nothing is put in
// its place), and install says so too.
// A companion that is there but not cniforge's, or not of this version,
// stops the install: a stale file would otherwise run its plugins at
// another version.
// Plugins are the names cniforge holds. It returns the exit status.
func Install(dir string, force bool, plugins []string, stdout, stderr io.Writer) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "cniforge install: find this executable: %v\n", err)
		return 1
	}
	src := sources{full: self, fullNames: plugins}
	for _, bin := range companion.Binaries() {
		c, err := findCompanion(filepath.Join(filepath.Dir(self), bin), bin, plugins)
		if err != nil {
			fmt.Fprintf(stderr, "cniforge install: %v; nothing installed\n", err)
			return 1
		}
		if c.path == "" {
			fmt.Fprintf(stdout, "no %s beside %s: %s\n", bin, self, missingCompanion(bin))
			src.missing = append(src.missing, bin)
			continue
		}
		src.companions = append(src.companions, c)
	}
	if err := runInstall(src, dir, force, stdout); err != nil {
		fmt.Fprintf(stderr, "cniforge install: %v\n", err)
		return 1
	}
	return 0
}

// missingCompanion says what installing without bin means for the plugins
// it would have held.
func missingCompanion(bin string) string {
	held := companion.Only(bin)
	if len(held) == 0 {
		return "its plugins linked to cniforge (they start costlier so)"
	}
	return fmt.Sprintf("%s not installed (cniforge does not hold it)", strings.Join(held, " "))
}

// sources are the binaries to install: the full multicall with the
// plugins it holds, the companions found beside it, and the companions not
// found (whose own plugins are not installed).
type sources struct {
	full       string
	fullNames  []string
	companions []companionBinary
	missing    []string
}

// companionBinary is a companion multicall found beside cniforge.
type companionBinary struct {
	name  string   // its file name: cniforge-light, cniforge-dhcp
	path  string   // where it is ("" when it is not)
	names []string // the plugins it holds, as its `version` lists them
}

// findCompanion returns the companion multicall bin at path (path "" if
// there is none) and the plugins it holds, as its `version` lists them. It
// must be cniforge's, of this suite's version, and hold only plugins
// cniforge holds too or that companion.Holding gives to it.
func findCompanion(path, bin string, full []string) (companionBinary, error) {
	c := companionBinary{name: bin}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	ok, err := hasMark(path)
	if err != nil {
		return c, err
	}
	if !ok {
		return c, fmt.Errorf("%s is not cniforge's", path)
	}
	cmd := exec.Command(path, "version")
	cmd.Env = []string{} // no CNI_COMMAND: its command line, not a plugin call
	out, err := cmd.Output()
	if err != nil {
		return c, fmt.Errorf("%s version: %w", path, err)
	}
	first, rest, _ := strings.Cut(string(out), "\n")
	if want := bin + " " + plugin.SuiteVersion(); first != want {
		return c, fmt.Errorf("%s is %q, not %q", path, first, want)
	}
	for _, line := range strings.Split(rest, "\n") {
		if l, ok := strings.CutPrefix(line, "plugins: "); ok {
			c.names = strings.Fields(l)
		}
	}
	if len(c.names) == 0 {
		return c, fmt.Errorf("%s version lists no plugins", path)
	}
	for _, n := range c.names {
		if !slices.Contains(full, n) && companion.Holding(n) != bin {
			return c, fmt.Errorf("%s holds %q, which cniforge does not", path, n)
		}
	}
	c.path = path
	return c, nil
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

func runInstall(src sources, dir string, force bool, out io.Writer) error {
	binaries := []string{"cniforge"}
	from := map[string]string{"cniforge": src.full}
	target := map[string]string{}
	pluginNames := slices.Clone(src.fullNames)
	for _, c := range src.companions {
		binaries = append(binaries, c.name)
		from[c.name] = c.path
		for _, n := range c.names {
			target[n] = c.name
			if !slices.Contains(pluginNames, n) {
				pluginNames = append(pluginNames, n)
			}
		}
	}
	slices.Sort(pluginNames)
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
	var unservedNames []string
	for _, bin := range src.missing {
		unservedNames = append(unservedNames, companion.Only(bin)...)
	}
	left := map[string]existing{}
	for _, n := range unservedNames {
		st, err := classifyLeft(filepath.Join(dir, n))
		if err != nil {
			return err
		}
		left[n] = st
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// Every binary first: a link renamed to one must find it whole.
	for _, b := range binaries {
		if err := copyAside(from[b], dir, b); err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: %s\n", filepath.Join(dir, b), state[b])
	}
	for _, n := range pluginNames {
		t := target[n]
		if t == "" {
			t = "cniforge"
		}
		if err := symlinkAside(t, dir, n); err != nil {
			return err
		}
		fmt.Fprintf(out, "%s -> %s: %s\n", filepath.Join(dir, n), t, state[n])
	}
	// Last: until cniforge is replaced, a link to an old one that held
	// dhcp still runs it.
	for _, n := range unservedNames {
		path, bin := filepath.Join(dir, n), companion.Holding(n)
		switch left[n] {
		case ours:
			if !linksTo(path, filepath.Join(dir, "cniforge")) {
				// A binary of its own (an older multicall's copy, a
				// separate dhcp, an older cniforge-dhcp) still runs
				// dhcp: live pods' DELs need it until one is installed.
				fmt.Fprintf(out, "%s: left as it is, cniforge's from an earlier install (%s is in %s, not installed)\n", path, n, bin)
				continue
			}
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			fmt.Fprintf(out, "%s: removed cniforge's (%s is in %s, not installed)\n", path, n, bin)
		case foreign:
			fmt.Fprintf(out, "%s: left as it is, not cniforge's (%s is in %s, not installed)\n", path, n, bin)
		}
	}
	return nil
}

// linksTo reports whether path is a symlink to target (a relative link read
// from path's folder).
func linksTo(path, target string) bool {
	t, err := os.Readlink(path)
	if err != nil {
		return false
	}
	if !filepath.IsAbs(t) {
		t = filepath.Join(filepath.Dir(path), t)
	}
	return filepath.Clean(t) == filepath.Clean(target)
}

// classifyLeft is classify for the name of a plugin this install does not
// install (dhcp without cniforge-dhcp): a directory there is not an error
// but anything else's, left as it is.
func classifyLeft(path string) (existing, error) {
	if fi, err := os.Lstat(path); err == nil && fi.IsDir() {
		return foreign, nil
	}
	return classify(path)
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
