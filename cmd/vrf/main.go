package main

import (
	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/plugins/meta/vrf"
)

func main() { plugin.Main(vrf.Plugin) }
