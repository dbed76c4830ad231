package main

import (
	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/plugins/meta/portmap"
)

func main() { plugin.Main(portmap.Plugin) }
