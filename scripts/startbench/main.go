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
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
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
