package main

import (
	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/plugins/main/ptp"
)

func main() { plugin.Main(ptp.Plugin) }
