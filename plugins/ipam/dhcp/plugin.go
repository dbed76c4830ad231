// Package dhcp is the dhcp IPAM plugin and its daemon. A plugin process
// cannot hold a lease, so one binary plays two roles: `dhcp daemon`
// (DaemonMain, Run) acquires, renews and releases leases from inside the
// container's netns and persists them under its state dir; the plugin
// (Plugin) asks it over a unix socket, with upstream's wire protocol (Go
// net/rpc over HTTP, service "DHCP", methods Allocate and Release), which
// pkg/gobrpc speaks without linking net/rpc into the multicall binary.
//
// Per attachment, with client ID <containerID>/<network>/<ifname>:
//
//	acquire   DORA on the container interface, inside its netns
//	persist   <statedir>/<hash>.json, written atomically before ADD returns
//	renew     at T1 (rebind at T2); re-acquire once expired
//	drop      when the interface or netns disappears
//	release   RELEASE to the server on DEL (and on GC of an unlisted attachment)
//
// The package keeps no global state and never exits the process, so it can
// be linked into a multicall binary.
package dhcp

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/cniforge/plugins/pkg/plugin"
)

// Plugin is the dhcp plugin's descriptor.
var Plugin = plugin.Plugin{
	Name:     "dhcp",
	Summary:  "gets addresses from a DHCP server through the dhcp daemon (dhcp daemon -h)",
	Versions: plugin.AllVersions,
	Funcs: skel.CNIFuncs{
		Add:    cmdAdd,
		Del:    cmdDel,
		Check:  cmdCheck,
		GC:     cmdGC,
		Status: cmdStatus,
	},
	Subcommands: map[string]func([]string) int{"daemon": daemonCommand},
}

// daemonCommand is `dhcp daemon [flags]`: it serves until SIGTERM or SIGINT.
func daemonCommand(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return DaemonMain(ctx, args, os.Getenv, os.Stderr)
}
