// Package plugin describes a cniforge plugin (its name, callbacks, supported
// spec versions and about text) and runs it as skel would. cmd/<name>/main.go
// only hands a plugin's descriptor to Main, so the same plugin packages can be
// linked into one multicall binary later.
package plugin

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/result"
)

// Version is the suite's version, set at build time by build_linux.sh with
// -ldflags "-X github.com/cniforge/plugins/pkg/plugin.Version=...".
var Version = ""

// Plugin is what a plugin package exports.
type Plugin struct {
	Name     string             // binary name = folder name = config "type"
	Summary  string             // one line: what it does
	Versions version.PluginInfo // spec versions it accepts
	Funcs    skel.CNIFuncs      // ADD, DEL, CHECK, GC, STATUS

	// InProcess says the plugin may run inside the process of a plugin
	// that delegates to it (pkg/ipam, in the multicall binary): its
	// commands print only to Stdout(args), read the CNI_* values only
	// from args, and keep no state between calls.
	InProcess bool
	// Subcommands are what the plugin's binary answers besides the CNI
	// protocol, picked by its first argument (dhcp's "daemon"); each gets
	// the arguments after that name and returns the exit status. They work
	// the same from the separate binary and the multicall one.
	Subcommands map[string]func(args []string) int
}

// AllVersions is every spec version a cniforge plugin accepts.
var AllVersions = version.PluginSupports("0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")

// About is the text printed on stderr when the plugin runs without CNI_COMMAND.
func (p Plugin) About() string {
	return fmt.Sprintf("CNI %s plugin %s (cniforge): %s", p.Name, SuiteVersion(), p.Summary)
}

// SuiteVersion is Version, else the module version Go stamped, else "unknown".
func SuiteVersion() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "unknown"
}

// Main runs p as skel would and exits: the result or CNI error JSON on stdout.
func Main(p Plugin) { MainArgs(p, os.Args[1:]) }

// MainArgs is Main with the arguments that follow the plugin's name: a
// subcommand of p when the first one names one, else the CNI protocol.
func MainArgs(p Plugin, args []string) {
	if len(args) > 0 {
		if sub, ok := p.Subcommands[args[0]]; ok {
			os.Exit(sub(args[1:]))
		}
	}
	os.Exit(runProcess(p))
}

// runProcess is skel.PluginMainFuncs for this process, through the
// dispatch RunInProcess uses: the same checks in the same order, the
// result or the CNI error JSON on stdout, and the exit status. It reads
// stdin once and decodes the config's version and name once (skel would
// decode them three times), and a panic in the plugin still crashes the
// process, as under skel.
func runProcess(p Plugin) int {
	d := dispatch{getenv: os.Getenv, stdout: os.Stdout, stderr: os.Stderr}
	if cmd := os.Getenv("CNI_COMMAND"); cmd != "" && cmd != "VERSION" {
		// As skel: no stdin read without a command, nor for VERSION.
		stdin, err := io.ReadAll(os.Stdin)
		if err != nil {
			return printError(types.NewError(types.ErrIOFailure, fmt.Sprintf("error reading from stdin: %v", err), ""))
		}
		d.stdin = stdin
	}
	if e := d.main(p); e != nil {
		return printError(e)
	}
	return 0
}

// printError prints e as skel does (JSON on stdout) and returns the exit
// status of a failed command.
func printError(e *types.Error) int {
	if err := e.Print(); err != nil {
		fmt.Fprintf(os.Stderr, "error writing error JSON to stdout: %v\n", err)
	}
	return 1
}

// SkelFuncs is p.Funcs as skel should call them: each command's error is
// flattened (result.Flatten) so the runtime sees its whole message with
// the code of the CNI error inside it.
func (p Plugin) SkelFuncs() skel.CNIFuncs {
	return skel.CNIFuncs{
		Add:    flattened(notOwnNetns(p.Funcs.Add)),
		Del:    flattened(notOwnNetns(p.Funcs.Del)),
		Check:  flattened(p.Funcs.Check),
		GC:     flattened(p.Funcs.GC),
		Status: flattened(p.Funcs.Status),
	}
}

// notOwnNetns refuses (code 8), before fn acts, a CNI_NETNS that is the
// plugin's own namespace. skel refuses it only after ADD or DEL ran: an
// IPAM plugin had by then reserved an address or taken a DHCP lease for a
// host interface, and printed its result before the error.
func notOwnNetns(fn func(*skel.CmdArgs) error) func(*skel.CmdArgs) error {
	if fn == nil {
		return nil
	}
	return func(args *skel.CmdArgs) error {
		if err := ns.RefuseOwn(args.Netns, args.NetnsOverride); err != nil {
			return err
		}
		return fn(args)
	}
}

func flattened(fn func(*skel.CmdArgs) error) func(*skel.CmdArgs) error {
	if fn == nil {
		return nil
	}
	return func(args *skel.CmdArgs) error { return result.Flatten(fn(args)) }
}

// Logger returns the logger a command uses: stderr, quiet (warnings and
// errors) unless CNIFORGE_LOG_LEVEL=debug|info, tagged with the command's
// identity. stdout is reserved for the CNI result.
func Logger(cmd string, args *skel.CmdArgs) *slog.Logger {
	return newLogger(os.Stderr, os.Getenv("CNIFORGE_LOG_LEVEL")).With(
		"cmd", cmd, "containerID", args.ContainerID, "ifName", args.IfName, "netns", args.Netns)
}

func newLogger(w io.Writer, level string) *slog.Logger {
	lvl := slog.LevelWarn
	switch strings.ToLower(level) {
	case "debug":
		lvl = slog.LevelDebug
	case "info":
		lvl = slog.LevelInfo
	case "error":
		lvl = slog.LevelError
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: lvl}))
}
