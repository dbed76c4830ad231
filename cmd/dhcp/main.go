// Command dhcp is the dhcp IPAM plugin; `dhcp daemon [flags]` runs the
// daemon that holds the leases (see plugins/ipam/dhcp/README.md).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/plugins/ipam/dhcp"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "daemon" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		code := dhcp.DaemonMain(ctx, os.Args[2:], os.Getenv, os.Stderr)
		stop()
		os.Exit(code)
	}
	plugin.Main(dhcp.Plugin)
}
