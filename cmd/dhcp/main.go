// Command dhcp is the dhcp IPAM plugin; `dhcp daemon [flags]` runs the
// daemon that holds the leases (see plugins/ipam/dhcp/README.md).
package main

import (
	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/plugins/ipam/dhcp"
)

func main() { plugin.Main(dhcp.Plugin) }
