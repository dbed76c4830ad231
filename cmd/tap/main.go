package main

import (
	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/plugins/main/tap"
)

func main() { plugin.Main(tap.Plugin) }
