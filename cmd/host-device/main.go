package main

import (
	"github.com/cniforge/plugins/pkg/plugin"
	hostdevice "github.com/cniforge/plugins/plugins/main/host-device"
)

func main() { plugin.Main(hostdevice.Plugin) }
