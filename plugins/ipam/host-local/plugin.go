// Package hostlocal is the host-local IPAM plugin: it hands out addresses
// from configured ranges and records each reservation as a file under
// <dataDir>/<network>/, in upstream host-local's on-disk format, with an
// index beside those files so ADD, DEL and CHECK cost the same with 4000
// pods on the network as with none.
package hostlocal

import (
	"github.com/containernetworking/cni/pkg/skel"

	"github.com/cniforge/plugins/pkg/plugin"
)

// Plugin is the host-local plugin's descriptor.
var Plugin = plugin.Plugin{
	Name:     "host-local",
	Summary:  "allocates IP addresses from ranges, recorded on the local host",
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
