package main

import (
	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/plugins/ipam/static"
)

func main() { plugin.Main(static.Plugin) }
