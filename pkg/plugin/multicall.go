package plugin

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
)

// Multicall is a companion multicall binary (plugins/companion): a few
// plugins in one executable, no node tool. The basename of argv[0] picks
// the plugin, so /opt/cni/bin/<plugin> can be a link to it;
// `<binary> <plugin>` works too, and `<binary> version` prints the suite's
// version and the plugins it holds (what `cniforge install` reads).
type Multicall struct {
	Binary  string                      // its file name: cniforge-light, cniforge-dhcp
	About   string                      // what it is, for its help
	Lookup  func(string) (Plugin, bool) // a switch over its plugins: nothing built at start
	Plugins func() []Plugin             // its plugins, sorted by name
}

// Main runs the plugin argv[0] or the first argument names; under any
// other name it is the binary's small command line. It exits.
func (m Multicall) Main() {
	SetLookup(m.Lookup)
	name := filepath.Base(os.Args[0])
	if p, ok := m.Lookup(name); ok {
		Main(p) // exits
		return
	}
	if len(os.Args) > 1 {
		if p, ok := m.Lookup(os.Args[1]); ok {
			MainArgs(p, os.Args[2:]) // exits
			return
		}
	}
	if cmd := os.Getenv("CNI_COMMAND"); cmd != "" {
		os.Exit(NoSuchPlugin(os.Stdout, m.Binary, name, cmd, m.names(), "the other plugins are in cniforge"))
	}
	os.Exit(m.Run(os.Args[1:], os.Stdout, os.Stderr))
}

// Run is the command line of a companion that argv[0] did not name a
// plugin of: version, or help. It returns the exit status.
func (m Multicall) Run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "version" || args[0] == "--version") {
		PrintVersion(stdout, m.Binary, m.names())
		return 0
	}
	w, rc := stderr, 2
	if len(args) == 1 && (args[0] == "help" || args[0] == "-h" || args[0] == "--help") {
		w, rc = stdout, 0
	}
	fmt.Fprintf(w, `%[1]s %[2]s: %[3]s

usage:
  %[1]s version      print the version and the plugins this binary holds
  %[1]s <plugin>     run a plugin (as /opt/cni/bin/<plugin> linked to it does)

plugins: %[4]s
The other plugins and the node tool (install, ls, gc, check, doctor) are in
cniforge; `+"`cniforge install`"+` links these plugins to this binary.
`, m.Binary, SuiteVersion(), m.About, strings.Join(m.names(), " "))
	return rc
}

func (m Multicall) names() []string { return Names(m.Plugins()) }

// Names returns the plugins' names, in their order.
func Names(ps []Plugin) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

// PrintVersion prints what `<binary> version` prints for every multicall
// binary: its name and the suite's version, the plugins it holds (the line
// `cniforge install` reads), and the CNI versions.
func PrintVersion(w io.Writer, binary string, plugins []string) {
	fmt.Fprintf(w, "%s %s\n", binary, SuiteVersion())
	fmt.Fprintf(w, "plugins: %s\n", strings.Join(plugins, " "))
	fmt.Fprintf(w, "CNI protocol versions supported: %s\n", strings.Join(AllVersions.SupportedVersions(), ", "))
}

// NoSuchPlugin answers a runtime that ran a multicall binary under a name
// that is no plugin of it (a config's type linked to it, or the binary's
// own name): CNI error JSON on stdout, code 7 (the config's type names
// nothing this binary holds), and the exit status 1, as a plugin fails.
// hint ends the details, after the plugins it holds.
func NoSuchPlugin(stdout io.Writer, binary, name, cmd string, holds []string, hint string) int {
	e := types.NewError(types.ErrInvalidNetworkConfig,
		fmt.Sprintf("type %q: no such plugin in the %s multicall binary (CNI_COMMAND %s)", name, binary, cmd),
		fmt.Sprintf("it holds: %s; %s", strings.Join(holds, " "), hint))
	b, err := json.MarshalIndent(e, "", "    ")
	if err != nil {
		return 1
	}
	_, _ = fmt.Fprintf(stdout, "%s\n", b) // nothing else to do if stdout is gone
	return 1
}
