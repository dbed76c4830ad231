// Command cniforge is the multicall binary: every cniforge plugin but dhcp
// in one executable, plus the node tool. Its companions (plugins/companion)
// sit beside it: cmd/cniforge-light holds the light plugins again, smaller,
// and cmd/cniforge-dhcp holds dhcp; install links those plugins to them,
// and cniforge runs cniforge-dhcp when asked for dhcp. The basename of
// argv[0] picks the plugin, so /opt/cni/bin/bridge can be a link to it;
// `cniforge <plugin>` works too.
// Run under any other name with CNI_COMMAND set (a runtime whose config's
// type is linked to cniforge, or is "cniforge"), it answers as a plugin
// that does not exist: CNI error JSON, code 7, exit 1.
//
//	cniforge version                 the suite's version and the plugins it holds
//	cniforge <plugin>                run that plugin (CNI_* environment, config on stdin)
//	cniforge install [--dir D] [--force]
//	                                 install this binary as D/cniforge (default
//	                                 /opt/cni/bin), its companions from beside it,
//	                                 and each plugin as a link to one of them
//	cniforge daemon [--dir D] [--force]
//	                                 the node image's command: install into D
//	                                 (default /host/opt/cni/bin), then stay up
//	cniforge ls [--json]             cached attachments, unowned host-local
//	                                 reservations, addresses used and free
//	cniforge gc [--apply] [--network NAME] [--min-age D] [--every D] [--allow-empty-cache]
//	                                 DEL attachments whose netns is gone, and
//	                                 old reservations nobody owns
//	cniforge check [--json] [--network NAME] [--repair]
//	                                 CHECK every cached attachment, naming each
//	                                 plugin whose part drifted; exit 1 if any;
//	                                 --repair re-applies rules and qdiscs
//	cniforge doctor [--json]         what makes the node misbehave, each with a fix
//	                                 (ls, gc, check and doctor take --cache-dir,
//	                                 --conf-dir, --bin-dir, --multus-dir)
//
// This package parses the command line and dispatches; the node tool's
// verbs live in pkg/node.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/containernetworking/cni/libcni"

	"github.com/cniforge/plugins/pkg/node"
	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/plugins/all"
	"github.com/cniforge/plugins/plugins/companion"
)

func main() {
	plugin.SetLookup(all.Lookup) // in-process IPAM finds host-local here too

	name := filepath.Base(os.Args[0])
	if p, ok := plugin.Lookup(name); ok {
		plugin.Main(p) // exits
		return
	}
	if companion.Holding(name) != "" {
		os.Exit(runCompanion(name, os.Args[1:]))
	}
	if len(os.Args) > 1 {
		if p, ok := plugin.Lookup(os.Args[1]); ok {
			plugin.MainArgs(p, os.Args[2:]) // exits
			return
		}
		if companion.Holding(os.Args[1]) != "" {
			os.Exit(runCompanion(os.Args[1], os.Args[2:]))
		}
	}
	plugins := all.Plugins()
	if cmd := os.Getenv("CNI_COMMAND"); cmd != "" {
		os.Exit(plugin.NoSuchPlugin(os.Stdout, "cniforge", name, cmd, plugin.Names(plugins), "unset CNI_COMMAND to use its command line"))
	}
	os.Exit(run(os.Args[1:], plugins, os.Stdout, os.Stderr))
}

// runCompanion runs a plugin cniforge does not hold (dhcp) from the
// companion binary beside this executable, as if it had been exec'd under
// the plugin's name (a link made by hand, or `cniforge dhcp daemon`): the
// same arguments, environment and descriptors. It returns only when that
// cannot be done: with CNI_COMMAND set, as a plugin fails (CNI error JSON,
// code 7); else with the reason on stderr.
func runCompanion(name string, args []string) int {
	bin := companion.Holding(name)
	self, err := os.Executable()
	if err == nil {
		path := filepath.Join(filepath.Dir(self), bin)
		err = syscall.Exec(path, append([]string{name}, args...), os.Environ())
		err = fmt.Errorf("run %s: %w", path, err)
	}
	if cmd := os.Getenv("CNI_COMMAND"); cmd != "" {
		return plugin.NoSuchPlugin(os.Stdout, "cniforge", name, cmd, plugin.Names(all.Plugins()),
			fmt.Sprintf("%s is in %s, which must be beside cniforge: %v", name, bin, err))
	}
	fmt.Fprintf(os.Stderr, "cniforge: %s is in %s, which must be beside cniforge: %v\n", name, bin, err)
	return 2
}

// run is the cniforge command line (argv[0] named no plugin); it returns the
// exit status.
func run(args []string, plugins []plugin.Plugin, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr, plugins)
		return 2
	}
	if p, ok := plugin.Lookup(args[0]); ok {
		plugin.MainArgs(p, args[1:]) // exits
		return 0
	}
	switch args[0] {
	case "version", "--version":
		plugin.PrintVersion(stdout, "cniforge", plugin.Names(plugins))
		// What scripts (release, lanes) read to find the companions.
		fmt.Fprintf(stdout, "companions: %s\n", strings.Join(companion.Binaries(), " "))
		return 0
	case "install":
		return install(args[1:], plugins, stdout, stderr)
	case "daemon":
		return daemon(signalContext(), args[1:], plugins, stdout, stderr)
	case "ls":
		return report("ls", node.Ls, args[1:], stdout, stderr)
	case "gc":
		return gc(args[1:], stdout, stderr)
	case "doctor":
		return report("doctor", node.Doctor, args[1:], stdout, stderr)
	case "check":
		return check(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		usage(stdout, plugins)
		return 0
	}
	fmt.Fprintf(stderr, "cniforge: unknown command or plugin %q\n", args[0])
	usage(stderr, plugins)
	return 2
}

// The node tool's verbs: each parses its flags, then runs pkg/node's verb.

func install(args []string, plugins []plugin.Plugin, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("cniforge install", flag.ContinueOnError)
	fl.SetOutput(stderr)
	dir := fl.String("dir", "/opt/cni/bin", "the runtime's plugin directory")
	force := fl.Bool("force", false, "replace files that are not cniforge's")
	if !parseFlags(fl, args, stderr) {
		return 2
	}
	return node.Install(*dir, *force, plugin.Names(plugins), stdout, stderr)
}

// daemon takes, after its own flags, only a gc loop: `gc ... --every D`.
func daemon(ctx context.Context, args []string, plugins []plugin.Plugin, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("cniforge daemon", flag.ContinueOnError)
	fl.SetOutput(stderr)
	o := node.DaemonOptions{}
	fl.StringVar(&o.Dir, "dir", "/host/opt/cni/bin", "the host's plugin directory, as mounted in this container")
	fl.BoolVar(&o.Force, "force", false, "replace files that are not cniforge's (upstream's plugins, say)")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	then := fl.Args()
	if len(then) > 0 && (then[0] != "gc" || !slices.ContainsFunc(then, func(a string) bool {
		return a == "--every" || strings.HasPrefix(a, "--every=")
	})) {
		fmt.Fprintf(stderr, "cniforge daemon: after its flags, only `gc ... --every DURATION` (the reclaim loop), not %q\n", strings.Join(then, " "))
		return 2
	}
	if len(then) > 0 {
		o.GC = then
		o.RunGC = func() int { return gc(then[1:], stdout, stderr) }
	}
	return node.Daemon(ctx, o, plugin.Names(plugins), stdout, stderr)
}

func signalContext() context.Context {
	ctx, _ := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	return ctx
}

// nodeFlags are the flags of a verb that reads the node's folders.
func nodeFlags(name string, stderr io.Writer) (*flag.FlagSet, *node.Dirs) {
	fl := flag.NewFlagSet("cniforge "+name, flag.ContinueOnError)
	fl.SetOutput(stderr)
	d := &node.Dirs{}
	fl.StringVar(&d.Cache, "cache-dir", libcni.CacheDir, "libcni's cache (results/ below it)")
	fl.StringVar(&d.Conf, "conf-dir", "/etc/cni/net.d", "network configs")
	fl.StringVar(&d.Bin, "bin-dir", "/opt/cni/bin", "plugin binaries")
	fl.StringVar(&d.Multus, "multus-dir", node.DefaultMultusDir, "Multus's cache (its cniDir), read when there")
	fl.BoolVar(&d.RuntimeHere, "runtime-mount-ns", false, "the runtime makes its netns files in this mount namespace: a netns file missing here is gone, even where this cannot be shown to be the host's (a test node, a runtime in this same container)")
	return fl, d
}

// report runs a verb that takes the node flags and --json only (ls,
// doctor).
func report(verb string, run func(d *node.Dirs, asJSON bool, stdout, stderr io.Writer) int, args []string, stdout, stderr io.Writer) int {
	fl, d := nodeFlags(verb, stderr)
	asJSON := fl.Bool("json", false, "print JSON")
	if !parseFlags(fl, args, stderr) {
		return 2
	}
	return run(d, *asJSON, stdout, stderr)
}

func gc(args []string, stdout, stderr io.Writer) int {
	fl, d := nodeFlags("gc", stderr)
	var o node.GCOptions
	fl.BoolVar(&o.Apply, "apply", false, "do it (default: a dry run)")
	fl.StringVar(&o.Network, "network", "", "only this network")
	fl.DurationVar(&o.MinAge, "min-age", node.DefaultMinAge, "release an unowned reservation only when its file is this old")
	fl.BoolVar(&o.AllowEmpty, "allow-empty-cache", false, "go on when the cache has no results/ folder, or no attachment of a network with reservations")
	fl.DurationVar(&o.Every, "every", 0, "run again at this interval until SIGTERM or SIGINT")
	if !parseFlags(fl, args, stderr) {
		return 2
	}
	return node.GC(d, o, stdout, stderr)
}

func check(args []string, stdout, stderr io.Writer) int {
	fl, d := nodeFlags("check", stderr)
	var o node.CheckOptions
	fl.BoolVar(&o.JSON, "json", false, "print JSON")
	fl.StringVar(&o.Network, "network", "", "only this network")
	fl.BoolVar(&o.Repair, "repair", false, "re-apply what drifted where that leaves the container alone (masquerade, portmap, firewall, bandwidth)")
	if !parseFlags(fl, args, stderr) {
		return 2
	}
	return node.Check(d, o, stdout, stderr)
}

// parseFlags parses a verb's flags (fl named "cniforge VERB"); the verb
// takes no other argument. false: the reason is on stderr, exit 2.
func parseFlags(fl *flag.FlagSet, args []string, stderr io.Writer) bool {
	if err := fl.Parse(args); err != nil {
		return false
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", fl.Name(), fl.Arg(0))
		return false
	}
	return true
}

func usage(w io.Writer, plugins []plugin.Plugin) {
	fmt.Fprintf(w, `cniforge %s: the cniforge CNI plugins (dhcp beside it, in cniforge-dhcp) and the node tool

usage:
  cniforge version      print the version and the plugins this binary holds
  cniforge <plugin>     run a plugin (as /opt/cni/bin/<plugin> linked to cniforge does)
  cniforge install [--dir /opt/cni/bin] [--force]
                        install this binary into the directory, its companions
                        from beside it (cniforge-light: the light plugins;
                        cniforge-dhcp: dhcp), and each plugin as a link: those a
                        companion holds to it (they start cheaper there), the
                        others to cniforge; each file is replaced atomically,
                        and a file that is not cniforge's only with --force
  cniforge daemon [--dir /host/opt/cni/bin] [--force]
                        the node image's command (deploy/): install as above,
                        then stay up until SIGTERM; it reclaims nothing (run
                        gc on the host: deploy/systemd's cniforge-gc.timer)
  cniforge ls [--json]  list libcni's cached attachments (is their netns alive?),
                        host-local reservations no attachment owns, and per
                        network the addresses used and free
  cniforge gc [--apply] [--network NAME] [--min-age 5m] [--every DURATION]
     [--allow-empty-cache]
                        DEL (through libcni, with the config cached with it)
                        every cached attachment whose netns is positively gone,
                        then each host-local reservation no cached attachment
                        owns that is older than --min-age, in a network whose
                        lock is free; what it cannot decide it keeps and says
                        so. A dry run without --apply; --every repeats it until
                        SIGTERM or SIGINT
  cniforge check [--json] [--network NAME] [--repair]
                        CHECK (through libcni, with the cached config and result)
                        every cached attachment, one line each; exit 1 when one
                        drifted or leaked; --repair re-applies what drifted where
                        that leaves the container alone: masquerade rules, and
                        portmap, firewall and bandwidth (their ADD, in place)
  cniforge doctor [--json]
                        what makes the node misbehave (plugins missing or failing
                        VERSION, CNI rules in both iptables-legacy and -nft,
                        forwarding or br_netfilter off, a range nearly full),
                        each with what to do; exit 1 when it finds something
  ls, gc, check and doctor take --cache-dir (/var/lib/cni), --conf-dir
  (/etc/cni/net.d), --bin-dir (/opt/cni/bin) and --multus-dir
  (/var/lib/cni/multus: Multus's cache, whose attachments and reservations gc
  never takes); --runtime-mount-ns says the runtime makes its netns files in
  this mount namespace (a test node in namespaces of its own), where gc
  cannot show it is the host's

plugins: %s
`, plugin.SuiteVersion(), strings.Join(plugin.Names(plugins), " "))
}
