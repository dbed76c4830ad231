// Package loopback is the loopback plugin: it brings up "lo" in the
// container's network namespace and reports its addresses.
package loopback

import (
	"github.com/containernetworking/cni/pkg/skel"

	"github.com/cniforge/plugins/pkg/plugin"
)

// Plugin is the loopback plugin's descriptor.
var Plugin = plugin.Plugin{
	Name:     "loopback",
	Summary:  "brings up the loopback interface of the container",
	Versions: plugin.AllVersions,
	Funcs: skel.CNIFuncs{
		Add:    cmdAdd,
		Del:    cmdDel,
		Check:  cmdCheck,
		GC:     cmdGC,
		Status: cmdStatus,
	},
}
