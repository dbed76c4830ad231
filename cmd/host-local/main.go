package main

import (
	"github.com/cniforge/plugins/pkg/plugin"
	hostlocal "github.com/cniforge/plugins/plugins/ipam/host-local"
)

func main() { plugin.Main(hostlocal.Plugin) }
