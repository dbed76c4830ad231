// Command startbench measures what issue 25 asks of the multicall binary:
// that each plugin started through it (DIR/<plugin>, a link to
// DIR/cniforge made by `cniforge install --dir DIR`) starts at most as
// slowly as the same plugin built alone (bin/<plugin>, by ./build_linux.sh).
//
//	go run ./scripts/startbench [-n 200] [-trace 20] [-mode version,add] [-sep bin] [-c DIR]... [-p REGEXP] [-v] [-copy=false] [-evict=false] DIR
//
// For each plugin the multicall in DIR holds (`DIR/cniforge version`), it
// execs DIR/<plugin> and SEP/<plugin> (and each -c DIR/<plugin> there is,
// upstream's say) n times each, in turn (the order reversed every other
// round), so every binary sees the same machine load, and prints per
// plugin the median wall time and the median CPU time (user + system, the
// child's own rusage) of one exec, and their ratios to the multicall.
// Each exec is a real call that reaches the plugin's code and does no
// kernel work:
//
//   - version: CNI_COMMAND=VERSION. Pure start: the Go runtime, every
//     package's init, the frame that answers. What a multicall may add to a
//     plugin is all here.
//   - add: CNI_COMMAND=ADD with a config whose "ipam" is a number (and a
//     CNI_NETNS that does not exist). Every plugin, ours and upstream's,
//     refuses it while decoding its config, before it opens the namespace
//     (checked: the error must name "ipam"), so the frame's checks, stdin
//     and the plugin's config decoder run as well. The decoder stops at the
//     wrong key: this is not the whole parse and validate of a valid config,
//     which would then go on to the kernel.
//
// Then, unless -trace 0, each binary runs VERSION -trace times more with
// GODEBUG=inittrace=1 (untimed: the trace's own printing slows it), and
// it prints per plugin the median sum of the package inits' clock time and
// allocations per exec, the packages initialised, the minor page faults of
// the timed execs, and (-v: all of them) the packages whose init the
// multicall runs and the separate binary does not, heaviest first. That is
// one part of what differs; the other is the bigger binary itself (more
// pages to fault in, a runtime start that grows with the binary), which
// the faults column hints at.
//
// It measures copies (-copy=false: the files in place), each folder's
// binaries written the same way into a temporary folder: the multicall by
// its own `cniforge install`, the others by a plain copy; then dropped from
// the page cache (-evict=false: not), so that each is read in by its first
// exec, untimed, as a node's binaries are after a reboot. How a binary's
// pages came into the page cache matters: on our test VM a fresh copy of
// bin/loopback started about a fifth cheaper in CPU time than bin/loopback
// as the Go linker wrote it, or than the copy dropped and read in again.
//
// It needs no root and touches no namespace. Run it after ./build_linux.sh
// and `bin/cniforge install --dir DIR`.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/scripts/internal/stats"
)

type options struct {
	n, trace int
	modes    []string
	sep      string
	compare  []string
	only     *regexp.Regexp
	verbose  bool
	copy     bool
	evict    bool
}

func main() {
	var o options
	flag.IntVar(&o.n, "n", 200, "timed execs per plugin, folder and mode")
	flag.IntVar(&o.trace, "trace", 20, "GODEBUG=inittrace=1 execs per plugin and folder (0: none)")
	modes := flag.String("mode", "version,add", "comma-separated: version (CNI_COMMAND=VERSION), add (ADD of a config refused while parsing)")
	flag.StringVar(&o.sep, "sep", "bin", "the folder of separately built plugins")
	flag.Func("c", "another folder of plugins to compare (upstream's, say); repeatable; plugins it lacks show as -", func(s string) error {
		o.compare = append(o.compare, s)
		return nil
	})
	only := flag.String("p", "", "only the plugins whose name matches this regular expression")
	flag.BoolVar(&o.verbose, "v", false, "list every package only the multicall initialises, per plugin")
	flag.BoolVar(&o.copy, "copy", true, "measure copies of the binaries, each written the same way (false: the files in place)")
	flag.BoolVar(&o.evict, "evict", true, "drop the copies from the page cache, so each is read in by its first exec as after a reboot (false: keep the pages the copy wrote)")
	flag.Parse()
	o.modes = strings.Split(*modes, ",")
	var err error
	if o.only, err = regexp.Compile(*only); err != nil {
		fmt.Fprintln(os.Stderr, "startbench: -p:", err)
		os.Exit(2)
	}
	for _, m := range o.modes {
		if _, ok := calls[m]; !ok {
			fmt.Fprintf(os.Stderr, "startbench: -mode: %q is neither version nor add\n", m)
			os.Exit(2)
		}
	}
	if flag.NArg() != 1 || o.n < 1 || o.trace < 0 {
		fmt.Fprintln(os.Stderr, "usage: startbench [-n N] [-trace N] [-mode version,add] [-sep DIR] [-c DIR]... [-p REGEXP] [-v] [-copy=false] [-evict=false] DIR")
		os.Exit(2)
	}
	if err := run(os.Stdout, flag.Arg(0), o); err != nil {
		fmt.Fprintln(os.Stderr, "startbench:", err)
		os.Exit(1)
	}
}

// call is one way to exec a plugin: its environment (besides PATH), its
// stdin, and what its answer must be, so that a binary that fails early
// (missing, the wrong plugin, a crash) is never timed as a fast one.
type call struct {
	title string
	env   func(plugin string) []string
	stdin func(plugin string) []byte
	check func(exit int, stdout []byte) error
}

var calls = map[string]call{
	"version": {
		title: "CNI_COMMAND=VERSION",
		env:   func(string) []string { return []string{"CNI_COMMAND=VERSION"} },
		stdin: func(string) []byte { return nil },
		check: func(exit int, stdout []byte) error {
			var v struct {
				Supported []string `json:"supportedVersions"`
			}
			if exit != 0 || json.Unmarshal(stdout, &v) != nil || len(v.Supported) == 0 {
				return fmt.Errorf("exit %d, want 0 and a version list", exit)
			}
			return nil
		},
	},
	"add": {
		title: `ADD of {"ipam": 5, ...} (refused while parsing)`,
		env: func(string) []string {
			return []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=startbench", "CNI_IFNAME=eth0",
				"CNI_NETNS=/run/netns/cniforge-startbench-none", "CNI_PATH=/nonexistent"}
		},
		stdin: func(plugin string) []byte {
			return fmt.Appendf(nil, `{"cniVersion":"1.0.0","name":"startbench","type":%q,"ipam":5}`, plugin)
		},
		check: func(exit int, stdout []byte) error {
			var e struct {
				Code int    `json:"code"`
				Msg  string `json:"msg"`
			}
			if exit != 1 || json.Unmarshal(stdout, &e) != nil || e.Code == 0 || !strings.Contains(e.Msg, "ipam") {
				return fmt.Errorf("exit %d, want 1 and CNI error JSON about ipam", exit)
			}
			return nil
		},
	},
}

// folder is one way the plugins are built: the multicall's links, the
// separate binaries, or a folder to compare with.
type folder struct{ label, dir string }

// sample is one exec: wall time, CPU time (user + system), minor page
// faults. (Not the peak RSS: a child forked with CLONE_VM, as Go's
// os/exec does, reports the parent's.)
type sample struct {
	wall, cpu time.Duration
	minflt    int64
}

func run(w io.Writer, multi string, o options) error {
	plugins, err := multicallPlugins(filepath.Join(multi, "cniforge"))
	if err != nil {
		return err
	}
	plugins = slices.DeleteFunc(plugins, func(p string) bool { return !o.only.MatchString(p) })
	if len(plugins) == 0 {
		return fmt.Errorf("no plugin in %s matches -p %q", multi, o.only)
	}
	folders := []folder{{"multi", multi}, {"sep", o.sep}}
	for i, d := range o.compare {
		folders = append(folders, folder{fmt.Sprintf("c%d", i+1), d})
	}
	// The multicall's links and the separate binaries must all be there;
	// a folder to compare with may lack some.
	for _, f := range folders[:2] {
		for _, p := range plugins {
			if _, err := os.Stat(filepath.Join(f.dir, p)); err != nil {
				return err
			}
		}
	}

	fmt.Fprintf(w, "startbench: %d plugins, %d execs each per plugin, folder and mode, in turn; load average %s\n",
		len(plugins), o.n, loadavg())
	for _, f := range folders {
		fmt.Fprintf(w, "  %-5s = %s\n", f.label, f.dir)
	}
	if o.copy {
		tmp, err := os.MkdirTemp("", "cniforge-startbench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		if folders, err = copyFolders(tmp, folders, plugins, o.evict); err != nil {
			return err
		}
		how := "each read in by its first exec"
		if !o.evict {
			how = "in the page cache as the copy wrote them"
		}
		fmt.Fprintf(w, "  measured as copies in %s (multi by its own cniforge install --dir, the others by a plain copy), %s\n", tmp, how)
	}
	faults := map[string][]float64{} // plugin/folder → minor faults, over every mode
	for _, m := range o.modes {
		c := calls[m]
		samples, err := measure(folders, plugins, c, o.n)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "\n%s: median ms per exec (ratio = multi / that folder), load average after: %s\n", c.title, loadavg())
		printTable(w, folders, plugins, samples)
		for k, v := range samples {
			for _, s := range v {
				faults[k] = append(faults[k], float64(s.minflt))
			}
		}
	}
	if o.trace > 0 {
		traces, err := traceInits(folders, plugins, o.trace)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "\nGODEBUG=inittrace=1, VERSION, median over %d execs: package inits' clock ms and KiB allocated per exec,\n"+
			"packages initialised, minor page faults (median of the timed execs); last: what only the multicall initialises\n", o.trace)
		printTraces(w, folders, plugins, traces, faults, o.verbose)
	}
	return nil
}

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
			if err := settle(filepath.Join(dst, "cniforge"), evict); err != nil {
				return nil, err
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

// multicallPlugins is the plugin list `cniforge version` prints.
func multicallPlugins(cniforge string) ([]string, error) {
	out, err := exec.Command(cniforge, "version").Output()
	if err != nil {
		return nil, fmt.Errorf("%s version: %w", cniforge, err)
	}
	return parsePluginList(out)
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

func key(plugin, label string) string { return plugin + "/" + label }

// inTurn is the folders that run plugin p in this round, in turn: the
// order reversed every other round (what the machine's load does to one,
// it does to the others), without a folder to compare with (-c) that
// lacks p.
func inTurn(folders []folder, round int, p string) []folder {
	order := make([]folder, 0, len(folders))
	for _, f := range folders {
		if _, err := os.Stat(filepath.Join(f.dir, p)); err != nil && f.label != "multi" && f.label != "sep" {
			continue
		}
		order = append(order, f)
	}
	if round%2 != 0 {
		slices.Reverse(order)
	}
	return order
}

// measure execs every plugin in every folder that has it n times, after
// one untimed exec each (page cache). Round by round, plugin by plugin,
// folder by folder, the folders' order reversed every other round: what
// the machine's load does to one, it does to the others.
func measure(folders []folder, plugins []string, c call, n int) (map[string][]sample, error) {
	samples := map[string][]sample{}
	for round := -1; round < n; round++ {
		for _, p := range plugins {
			for _, f := range inTurn(folders, round, p) {
				path := filepath.Join(f.dir, p)
				s, _, err := execOnce(path, c.env(p), c.stdin(p), c.check)
				if err != nil {
					return nil, err
				}
				if round >= 0 {
					samples[key(p, f.label)] = append(samples[key(p, f.label)], s)
				}
			}
		}
	}
	return samples, nil
}

// execOnce runs path once with env (and PATH only: nothing of ours, such
// as GODEBUG or GOMAXPROCS, leaks into it) and stdin, and checks its answer.
func execOnce(path string, env []string, stdin []byte, check func(int, []byte) error) (sample, []byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(path)
	cmd.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t0 := time.Now()
	err := cmd.Run()
	wall := time.Since(t0)
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		return sample{}, nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := check(cmd.ProcessState.ExitCode(), stdout.Bytes()); err != nil {
		return sample{}, nil, fmt.Errorf("%s %s: %w: stdout %q, stderr %q", strings.Join(env, " "), path, err, stdout.Bytes(), stderr.Bytes())
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return sample{
		wall:   wall,
		cpu:    time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		minflt: ru.Minflt,
	}, stderr.Bytes(), nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func medianMs(v []sample, f func(sample) time.Duration) float64 {
	d := make([]time.Duration, len(v))
	for i, s := range v {
		d[i] = f(s)
	}
	return ms(stats.Median(d))
}

func printTable(w io.Writer, folders []folder, plugins []string, samples map[string][]sample) {
	var cols []string // per group: multi, then each folder and multi/folder
	for i, f := range folders {
		cols = append(cols, fmt.Sprintf(" %7s", f.label))
		if i > 0 {
			cols = append(cols, fmt.Sprintf(" %7s", "m/"+f.label))
		}
	}
	group := strings.Join(cols, "")
	width := len(group)
	fmt.Fprintf(w, "%-12s %-*s %s\n", "", width-1, "wall ms (median)", "CPU ms (median)")
	fmt.Fprintf(w, "%-12s%s %s\n", "plugin", group, group)
	var within [2]int // multi <= sep, in wall and in CPU
	for _, p := range plugins {
		row := fmt.Sprintf("%-12s", p)
		for j, f := range []func(sample) time.Duration{
			func(s sample) time.Duration { return s.wall },
			func(s sample) time.Duration { return s.cpu },
		} {
			if j > 0 {
				row += " "
			}
			m := medianMs(samples[key(p, "multi")], f)
			for i, fo := range folders {
				v, ok := samples[key(p, fo.label)]
				if !ok {
					row += fmt.Sprintf(" %7s %7s", "-", "-")
					continue
				}
				x := medianMs(v, f)
				row += fmt.Sprintf(" %7.2f", x)
				if i > 0 {
					row += fmt.Sprintf(" %7.2f", m/x)
				}
				if fo.label == "sep" && m <= x {
					within[j]++
				}
			}
		}
		fmt.Fprintln(w, row)
	}
	fmt.Fprintf(w, "multi <= sep: %d of %d plugins in wall time, %d of %d in CPU time\n",
		within[0], len(plugins), within[1], len(plugins))
}

// inittrace is what one exec's GODEBUG=inittrace=1 lines add up to.
type inittrace struct {
	clock float64            // ms, every package's init
	bytes int64              // allocated by the inits
	pkgs  map[string]float64 // package → its init's clock ms
}

var initLine = regexp.MustCompile(`^init (\S+) @[0-9.]+ ms, ([0-9.]+) ms clock, ([0-9]+) bytes, [0-9]+ allocs$`)

// parseInittrace sums the runtime's inittrace lines in stderr; other lines
// are skipped.
func parseInittrace(stderr []byte) inittrace {
	t := inittrace{pkgs: map[string]float64{}}
	sc := bufio.NewScanner(bytes.NewReader(stderr))
	for sc.Scan() {
		m := initLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		clock, _ := strconv.ParseFloat(m[2], 64) // the regexp admits only numbers
		b, _ := strconv.ParseInt(m[3], 10, 64)
		t.clock += clock
		t.bytes += b
		t.pkgs[m[1]] += clock
	}
	return t
}

func traceInits(folders []folder, plugins []string, n int) (map[string][]inittrace, error) {
	c := calls["version"]
	env := func(p string) []string { return append(c.env(p), "GODEBUG=inittrace=1") }
	traces := map[string][]inittrace{}
	for round := range n {
		for _, p := range plugins {
			for _, f := range inTurn(folders, round, p) {
				path := filepath.Join(f.dir, p)
				_, stderr, err := execOnce(path, env(p), nil, c.check)
				if err != nil {
					return nil, err
				}
				t := parseInittrace(stderr)
				if len(t.pkgs) == 0 {
					return nil, fmt.Errorf("%s: no inittrace lines on stderr: %q", path, stderr)
				}
				traces[key(p, f.label)] = append(traces[key(p, f.label)], t)
			}
		}
	}
	return traces, nil
}

// extra is a package only the multicall initialises, with its median
// clock ms.
type extra struct {
	pkg string
	ms  float64
}

// onlyIn lists the packages a's inits have and b's do not, heaviest
// (median clock over a's execs) first.
func onlyIn(a, b []inittrace) []extra {
	var out []extra
	for pkg := range a[0].pkgs {
		if _, ok := b[0].pkgs[pkg]; ok {
			continue
		}
		v := make([]float64, len(a))
		for i, t := range a {
			v[i] = t.pkgs[pkg]
		}
		out = append(out, extra{pkg, stats.Median(v)})
	}
	slices.SortFunc(out, func(x, y extra) int {
		if c := -cmpFloat(x.ms, y.ms); c != 0 {
			return c
		}
		return strings.Compare(x.pkg, y.pkg)
	})
	return out
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func printTraces(w io.Writer, folders []folder, plugins []string, traces map[string][]inittrace, faults map[string][]float64, verbose bool) {
	hdr := fmt.Sprintf("%-12s", "plugin")
	for _, f := range folders {
		hdr += fmt.Sprintf(" %9s %6s %4s %6s", "init "+f.label, "KiB", "pkgs", "faults")
	}
	fmt.Fprintln(w, hdr+"  only in multi (ms), heaviest")
	for _, p := range plugins {
		row := fmt.Sprintf("%-12s", p)
		for _, f := range folders {
			v, ok := traces[key(p, f.label)]
			if !ok {
				row += fmt.Sprintf(" %9s %6s %4s %6s", "-", "-", "-", "-")
				continue
			}
			clock, kib := make([]float64, len(v)), make([]float64, len(v))
			for i, t := range v {
				clock[i], kib[i] = t.clock, float64(t.bytes)/1024
			}
			r := "-"
			if len(faults[key(p, f.label)]) > 0 {
				r = fmt.Sprintf("%.0f", stats.Median(faults[key(p, f.label)]))
			}
			row += fmt.Sprintf(" %9.3f %6.0f %4d %6s", stats.Median(clock), stats.Median(kib), len(v[0].pkgs), r)
		}
		extras := onlyIn(traces[key(p, "multi")], traces[key(p, "sep")])
		var sum float64
		var names []string
		for i, e := range extras {
			sum += e.ms
			if verbose || i < 3 {
				names = append(names, fmt.Sprintf("%s %.3f", strings.TrimPrefix(e.pkg, "github.com/"), e.ms))
			}
		}
		if len(extras) > 0 {
			row += fmt.Sprintf("  %d pkgs %.3f: %s", len(extras), sum, strings.Join(names, ", "))
		}
		fmt.Fprintln(w, row)
	}
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
