// Package vrf is the vrf plugin, a chained plugin: it puts CNI_IFNAME into
// a VRF (an L3 master device) in the container, so that its traffic is
// routed by the VRF's table and not the main one. Several interfaces can
// share one VRF.
//
// It runs on the frame in pkg/attach in chained mode (ADD needs
// prevResult, code 7 without it). ADD, in the container namespace, holding
// a lock on it (vrf commands there run in turn, so a DEL never deletes a
// VRF an ADD is joining, and two DELs never race on it: upstream #1282):
//
//	vrf      the VRF named vrfname, created (up, with table, or the first
//	         free table from 1) when missing; an existing one with another
//	         table than "table" is code 7
//	enslave  the interface joins the VRF; the kernel flushes its IPv6
//	         addresses and its routes, so both were read before
//	addrs    the IPv6 addresses put back (without duplicate address
//	         detection: IPAM's addresses are unique)
//	routes   the interface's routes from before (IPAM's) added in the VRF
//	         table
//
// The result is prevResult, unchanged. DEL releases the interface and
// deletes the VRF when no member is left; a VRF or an interface that is
// gone is success, and so is a namespace that is gone. CHECK verifies the
// VRF, its table, the membership, the addresses and the routes. GC and
// STATUS have nothing to do: all of it lives in the container namespace.
package vrf

import (
	"github.com/containernetworking/cni/pkg/version"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/plugin"
)

// The steps of ADD, in order, as passed to attach.Hooks.AfterStep.
const (
	StepVRF     = "vrf"     // the VRF exists
	StepEnslave = "enslave" // the interface is in the VRF
	StepAddrs   = "addrs"   // its IPv6 addresses are back
	StepRoutes  = "routes"  // its routes are in the VRF table
)

// AddSteps lists the steps of ADD in the order they run.
var AddSteps = []string{StepVRF, StepEnslave, StepAddrs, StepRoutes}

// versions are upstream's: 0.3.1 and up.
var versions = version.PluginSupports("0.3.1", "0.4.0", "1.0.0", "1.1.0")

// New returns the vrf plugin's descriptor running with hooks.
func New(hooks attach.Hooks) plugin.Plugin {
	return attach.Plugin[*netConf]{
		Name:     "vrf",
		Summary:  "puts a container interface into a VRF",
		Versions: versions,
		Chained:  true,
		Parse:    parse,
		// DEL needs only vrfname: a config edited since ADD (a table now
		// refused) must not keep the interface in the VRF (issue 22).
		Lenient: attach.DecodeOnly[netConf],
		Add:     add,
		Del:     del,
		Check:   check,
	}.Descriptor(hooks)
}

// Plugin is the vrf plugin's descriptor.
var Plugin = New(attach.Hooks{})
