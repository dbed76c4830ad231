package main

import (
	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/plugins/meta/sbr"
)

func main() { plugin.Main(sbr.Plugin) }
