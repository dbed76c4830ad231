package main

import (
	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/plugins/main/loopback"
)

func main() { plugin.Main(loopback.Plugin) }
