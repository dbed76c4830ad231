// Package all lists every plugin the cniforge multicall binary holds: all
// of the suite's but dhcp, which is in cniforge-dhcp (plugins/companion).
// A new plugin joins the suite with one line here (and its own cmd/<name>
// for the separate binary).
package all

import (
	"github.com/cniforge/plugins/pkg/plugin"
	hostlocal "github.com/cniforge/plugins/plugins/ipam/host-local"
	"github.com/cniforge/plugins/plugins/ipam/static"
	"github.com/cniforge/plugins/plugins/light"
	"github.com/cniforge/plugins/plugins/main/bridge"
	"github.com/cniforge/plugins/plugins/main/dummy"
	hostdevice "github.com/cniforge/plugins/plugins/main/host-device"
	"github.com/cniforge/plugins/plugins/main/ipvlan"
	"github.com/cniforge/plugins/plugins/main/loopback"
	"github.com/cniforge/plugins/plugins/main/macvlan"
	"github.com/cniforge/plugins/plugins/main/ptp"
	"github.com/cniforge/plugins/plugins/main/tap"
	"github.com/cniforge/plugins/plugins/main/vlan"
	"github.com/cniforge/plugins/plugins/meta/bandwidth"
	"github.com/cniforge/plugins/plugins/meta/firewall"
	"github.com/cniforge/plugins/plugins/meta/portmap"
	"github.com/cniforge/plugins/plugins/meta/sbr"
	"github.com/cniforge/plugins/plugins/meta/tuning"
	"github.com/cniforge/plugins/plugins/meta/vrf"
)

// Lookup returns the descriptor of the plugin with that name, and only
// that one: a plugin exec of the multicall binary asks for one plugin, so
// it builds no list of all of them and no table to find it in. The light
// plugins (plugins/light), which cniforge holds too, are found by light's
// own switch.
func Lookup(name string) (plugin.Plugin, bool) {
	switch name {
	case "bandwidth":
		return bandwidth.Plugin, true
	case "bridge":
		return bridge.Plugin, true
	case "dummy":
		return dummy.Plugin, true
	case "firewall":
		return firewall.Plugin, true
	case "host-device":
		return hostdevice.Plugin, true
	case "host-local":
		return hostlocal.Plugin, true
	case "ipvlan":
		return ipvlan.Plugin, true
	case "macvlan":
		return macvlan.Plugin, true
	case "portmap":
		return portmap.Plugin, true
	case "ptp":
		return ptp.Plugin, true
	case "tap":
		return tap.Plugin, true
	case "vlan":
		return vlan.Plugin, true
	}
	return light.Lookup(name)
}

// Plugins returns the descriptors, sorted by name. It is a function, not a
// package variable, so nothing is built before the multicall needs it.
func Plugins() []plugin.Plugin {
	return []plugin.Plugin{
		bandwidth.Plugin,
		bridge.Plugin,
		dummy.Plugin,
		firewall.Plugin,
		hostdevice.Plugin,
		hostlocal.Plugin,
		ipvlan.Plugin,
		loopback.Plugin,
		macvlan.Plugin,
		portmap.Plugin,
		ptp.Plugin,
		sbr.Plugin,
		static.Plugin,
		tap.Plugin,
		tuning.Plugin,
		vlan.Plugin,
		vrf.Plugin,
	}
}
