// Package static is the static IPAM plugin: it hands out the addresses,
// routes and DNS settings written in the config or passed per call by the
// runtime. It keeps no state, so DEL, GC and STATUS have nothing to undo or
// report, and CHECK verifies the config (and, given a prevResult, that the
// attachment still carries every address static would hand out).
package static

import (
	"github.com/containernetworking/cni/pkg/skel"

	"github.com/cniforge/plugins/pkg/plugin"
)

// Plugin is the static plugin's descriptor.
var Plugin = plugin.Plugin{
	Name:     "static",
	Summary:  "IPAM that hands out fixed addresses, routes and DNS from its config or the runtime",
	Versions: plugin.AllVersions,
	Funcs: skel.CNIFuncs{
		Add:    cmdAdd,
		Del:    cmdDel,
		Check:  cmdCheck,
		GC:     cmdGC,
		Status: cmdStatus,
	},
	InProcess: true,
}
