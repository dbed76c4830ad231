package main

import (
	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/plugins/meta/firewall"
)

func main() { plugin.Main(firewall.Plugin) }
