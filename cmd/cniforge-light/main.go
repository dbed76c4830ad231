// Command cniforge-light is the second multicall binary: only the light
// plugins (plugins/light: loopback, sbr, static, tuning, vrf), which start
// costlier through the full cniforge than upstream's own binaries do
// (issue 30). `cniforge install` puts it beside cniforge and links those
// plugins to it. The basename of argv[0] picks the plugin;
// `cniforge-light <plugin>` works too, and `cniforge-light version` prints
// the suite's version and the plugins it holds (what install reads). It
// has no node tool: that is cniforge's.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/plugins/light"
)

func main() {
	plugin.SetLookup(light.Lookup)

	name := filepath.Base(os.Args[0])
	if p, ok := light.Lookup(name); ok {
		plugin.Main(p) // exits
		return
	}
	if len(os.Args) > 1 {
		if p, ok := light.Lookup(os.Args[1]); ok {
			plugin.MainArgs(p, os.Args[2:]) // exits
			return
		}
	}
	if cmd := os.Getenv("CNI_COMMAND"); cmd != "" {
		os.Exit(noSuchPlugin(name, cmd, os.Stdout))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// noSuchPlugin answers a runtime that ran this binary under a name that
// is no plugin of it: CNI error JSON, code 7, exit 1 (as cniforge does).
func noSuchPlugin(name, cmd string, stdout io.Writer) int {
	e := types.NewError(types.ErrInvalidNetworkConfig,
		fmt.Sprintf("type %q: no such plugin in the %s multicall binary (CNI_COMMAND %s)", name, light.Binary, cmd),
		fmt.Sprintf("it holds: %s; the other plugins are in cniforge", strings.Join(names(), " ")))
	b, err := json.MarshalIndent(e, "", "    ")
	if err != nil {
		return 1
	}
	_, _ = fmt.Fprintf(stdout, "%s\n", b) // nothing else to do if stdout is gone
	return 1
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "version" || args[0] == "--version") {
		fmt.Fprintf(stdout, "%s %s\n", light.Binary, plugin.SuiteVersion())
		fmt.Fprintf(stdout, "plugins: %s\n", strings.Join(names(), " "))
		fmt.Fprintf(stdout, "CNI protocol versions supported: %s\n", strings.Join(plugin.AllVersions.SupportedVersions(), ", "))
		return 0
	}
	w, rc := stderr, 2
	if len(args) == 1 && (args[0] == "help" || args[0] == "-h" || args[0] == "--help") {
		w, rc = stdout, 0
	}
	fmt.Fprintf(w, `%[1]s %[2]s: the light cniforge plugins in one small binary

usage:
  %[1]s version      print the version and the plugins this binary holds
  %[1]s <plugin>     run a plugin (as /opt/cni/bin/<plugin> linked to it does)

plugins: %[3]s
The other plugins and the node tool (install, ls, gc, check, doctor) are in
cniforge; `+"`cniforge install`"+` links these plugins to this binary.
`, light.Binary, plugin.SuiteVersion(), strings.Join(names(), " "))
	return rc
}

func names() []string {
	ps := light.Plugins()
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}
