// Package plugin describes a cniforge plugin (its name, callbacks, supported
// spec versions and about text) and runs it through skel. cmd/<name>/main.go
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

// Main runs p through skel and exits: the result or CNI error JSON on stdout.
func Main(p Plugin) { MainArgs(p, os.Args[1:]) }

// MainArgs is Main with the arguments that follow the plugin's name: a
// subcommand of p when the first one names one, else the CNI protocol.
func MainArgs(p Plugin, args []string) {
	if len(args) > 0 {
		if sub, ok := p.Subcommands[args[0]]; ok {
			os.Exit(sub(args[1:]))
		}
	}
	prechecked(p)
	skel.PluginMainFuncs(p.SkelFuncs(), p.Versions, p.About())
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
