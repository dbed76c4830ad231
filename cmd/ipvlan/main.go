package main

import (
	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/plugins/main/ipvlan"
)

func main() { plugin.Main(ipvlan.Plugin) }
