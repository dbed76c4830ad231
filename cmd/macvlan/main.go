package main

import (
	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/plugins/main/macvlan"
)

func main() { plugin.Main(macvlan.Plugin) }
