package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/plugins/companion"
)

// folder is one way the plugins are built: the multicall's links, the
// separate binaries, or a folder to compare with.
type folder struct{ label, dir string }

// copyFolders copies what is measured into tmp, one folder per label,
// every binary written the same way, as `cniforge install` and a tarball's
// unpacking write them, and synced; with evict, dropped from the page
// cache then, so that each is read in by its first (untimed) exec, as a
// node's binaries are after a reboot. How a binary's pages came into the
// page cache changes its start: on our test VM a fresh copy of
// bin/loopback started about a fifth cheaper in CPU time than bin/loopback
// as the Go linker left it, or than the same copy dropped and read in
// again by exec; files in place that came about differently would favour
// one folder.
func copyFolders(tmp string, folders []folder, plugins []string, evict bool) ([]folder, error) {
	var out []folder
	for _, f := range folders {
		dst := filepath.Join(tmp, f.label)
		if f.label == "multi" {
			// The multicall exactly as a node gets it: the binary and its links.
			if b, err := exec.Command(filepath.Join(f.dir, "cniforge"), "install", "--dir", dst).CombinedOutput(); err != nil {
				return nil, fmt.Errorf("%s install --dir %s: %w\n%s", filepath.Join(f.dir, "cniforge"), dst, err, b)
			}
			// Every multicall: cniforge, and its companions (their
			// plugins' links) unless that cniforge was alone.
			for _, bin := range append([]string{"cniforge"}, companion.Binaries()...) {
				err := settle(filepath.Join(dst, bin), evict)
				if errors.Is(err, os.ErrNotExist) && bin != "cniforge" {
					continue
				}
				if err != nil {
					return nil, err
				}
			}
		} else {
			if err := os.Mkdir(dst, 0o755); err != nil {
				return nil, err
			}
			for _, p := range plugins {
				err := copyFile(filepath.Join(f.dir, p), filepath.Join(dst, p))
				if errors.Is(err, os.ErrNotExist) && f.label != "sep" {
					continue // a folder to compare with that lacks this plugin
				}
				if err != nil {
					return nil, err
				}
				if err := settle(filepath.Join(dst, p), evict); err != nil {
					return nil, err
				}
			}
		}
		out = append(out, folder{f.label, dst})
	}
	return out, nil
}

// copyFile copies src (a link followed) to a new executable dst.
func copyFile(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	if _, err := io.Copy(out, in); err != nil {
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return nil
}

// settle writes path's pages to disk and, with evict, drops them from the
// page cache (only clean pages can be dropped, hence the sync first).
func settle(path string, evict bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if evict {
		if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			return fmt.Errorf("drop %s from the page cache: %w", path, err)
		}
	}
	return nil
}

// multicallPlugins is every plugin cniforge and the companions beside it
// hold (what `cniforge install` links): the plugins each one's `version`
// lists, sorted, each once.
func multicallPlugins(cniforge string) ([]string, error) {
	var all []string
	for _, bin := range append([]string{"cniforge"}, companion.Binaries()...) {
		path := filepath.Join(filepath.Dir(cniforge), bin)
		if _, err := os.Stat(path); bin != "cniforge" && errors.Is(err, os.ErrNotExist) {
			continue
		}
		out, err := exec.Command(path, "version").Output()
		if err != nil {
			return nil, fmt.Errorf("%s version: %w", path, err)
		}
		ps, err := parsePluginList(out)
		if err != nil {
			return nil, err
		}
		all = append(all, ps...)
	}
	slices.Sort(all)
	return slices.Compact(all), nil
}

func parsePluginList(out []byte) ([]string, error) {
	for line := range strings.Lines(string(out)) {
		if rest, ok := strings.CutPrefix(line, "plugins:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				return f, nil
			}
		}
	}
	return nil, fmt.Errorf("no \"plugins:\" line in %q", out)
}
