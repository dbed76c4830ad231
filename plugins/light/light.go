// Package light lists the plugins the second multicall binary,
// cniforge-light, holds: those whose start through the full multicall
// cniforge costs more CPU than upstream's own binary of the same plugin
// (issue 30, docs/benchmarks.md). They make no rules, run no daemon and
// delegate to no IPAM plugin, so upstream's binaries of them are small;
// the full multicall makes every one of its execs pay for the library
// inits and the size of the heavy plugins (dhcp's option tables,
// nftables, dbus, and the runtime's walk of every function), which
// cniforge-light does not link. The heavy plugins start cheaper through
// cniforge than upstream's, so they stay there only.
//
// cniforge holds these plugins too (plugins/all): a link to it by hand
// still runs them. `cniforge install` links each of them to
// cniforge-light.
package light

import (
	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/plugins/ipam/static"
	"github.com/cniforge/plugins/plugins/main/loopback"
	"github.com/cniforge/plugins/plugins/meta/sbr"
	"github.com/cniforge/plugins/plugins/meta/tuning"
	"github.com/cniforge/plugins/plugins/meta/vrf"
)

// Binary is the light multicall's file name, in bin/, the release and
// /opt/cni/bin: companion.Light, written again so that cniforge-light links
// no package for one constant (TestBinaryIsTheCompanion holds them equal).
const Binary = "cniforge-light"

// Lookup returns the descriptor of the light plugin with that name (a
// switch, as plugins/all's: nothing built at start).
func Lookup(name string) (plugin.Plugin, bool) {
	switch name {
	case "loopback":
		return loopback.Plugin, true
	case "sbr":
		return sbr.Plugin, true
	case "static":
		return static.Plugin, true
	case "tuning":
		return tuning.Plugin, true
	case "vrf":
		return vrf.Plugin, true
	}
	return plugin.Plugin{}, false
}

// Plugins returns the descriptors, sorted by name.
func Plugins() []plugin.Plugin {
	return []plugin.Plugin{loopback.Plugin, sbr.Plugin, static.Plugin, tuning.Plugin, vrf.Plugin}
}
