package main

import (
	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/plugins/main/dummy"
)

func main() { plugin.Main(dummy.Plugin) }
