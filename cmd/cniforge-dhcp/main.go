// Command cniforge-dhcp is a companion multicall binary holding only the
// dhcp plugin and its daemon (`dhcp daemon`): their DHCP client stack is
// linked by nothing else, and in cniforge it made every other plugin's
// start about 5 % costlier (issue 30, docs/benchmarks.md). `cniforge
// install` puts it beside cniforge and links dhcp to it; cniforge runs it
// from beside itself when asked for dhcp. `cniforge-dhcp version` prints
// the suite's version and the plugins it holds (what install reads).
package main

import (
	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/plugins/companion"
	"github.com/cniforge/plugins/plugins/ipam/dhcp"
)

// multicall is this binary: its name, its plugins, its help.
var multicall = plugin.Multicall{
	Binary:  companion.DHCP,
	About:   "the cniforge dhcp plugin and its daemon",
	Lookup:  lookup,
	Plugins: func() []plugin.Plugin { return []plugin.Plugin{dhcp.Plugin} },
}

func main() { multicall.Main() }

func lookup(name string) (plugin.Plugin, bool) {
	if name == "dhcp" {
		return dhcp.Plugin, true
	}
	return plugin.Plugin{}, false
}
