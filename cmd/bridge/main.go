package main

import (
	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/plugins/main/bridge"
)

func main() { plugin.Main(bridge.Plugin) }
