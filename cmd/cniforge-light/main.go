// Command cniforge-light is a companion multicall binary: only the light
// plugins (plugins/light: loopback, sbr, static, tuning, vrf), which start
// costlier through the full cniforge than upstream's own binaries do
// (issue 30). `cniforge install` puts it beside cniforge and links those
// plugins to it. The basename of argv[0] picks the plugin;
// `cniforge-light <plugin>` works too, and `cniforge-light version` prints
// the suite's version and the plugins it holds (what install reads). It
// has no node tool: that is cniforge's.
package main

import (
	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/plugins/light"
)

// multicall is this binary: its name, its plugins, its help.
var multicall = plugin.Multicall{
	Binary:  light.Binary,
	About:   "the light cniforge plugins in one small binary",
	Lookup:  light.Lookup,
	Plugins: light.Plugins,
}

func main() { multicall.Main() }
