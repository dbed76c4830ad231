package main

import (
	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/plugins/meta/tuning"
)

func main() { plugin.Main(tuning.Plugin) }
