package main

import (
	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/plugins/meta/bandwidth"
)

func main() { plugin.Main(bandwidth.Plugin) }
