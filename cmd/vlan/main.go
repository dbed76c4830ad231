package main

import (
	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/plugins/main/vlan"
)

func main() { plugin.Main(vlan.Plugin) }
