package link

import (
	"fmt"
	"sort"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/result"
)

// Keys are the keys macvlan, ipvlan and vlan share, embedded in each
// plugin's netConf (the JSON names are upstream's).
type Keys struct {
	// Master is the parent interface; "" takes the default route's (or,
	// for ipvlan chained, prevResult's single interface).
	Master string `json:"master"`
	MTU    int    `json:"mtu"`
	// LinkInContainer: the master lives in the container namespace.
	LinkInContainer bool `json:"linkInContainer"`
}

// Validate checks the shared keys of c (master, when set, and mtu) and
// reports whether its ipam asks for addresses (see Layer3, which
// typelessL2 is passed to). Pure.
func (k Keys) Validate(c *attach.NetConf, typelessL2 bool) (layer3 bool, err error) {
	if k.Master != "" {
		if err := attach.ValidateIfName("master", k.Master); err != nil {
			return false, err
		}
	}
	if err := attach.ValidateMTU(k.MTU); err != nil {
		return false, err
	}
	return Layer3(c, typelessL2)
}

// A NamedMode is a link mode and its name, in the "mode" key and in CHECK.
type NamedMode[M comparable] struct {
	Mode M
	Name string
}

// The modes are slices of constants, not maps: the compiler lays them out,
// where a package-level map is built at init, in every exec of the
// multicall binary.
var (
	// MacvlanModes are the modes macvlan's "mode" takes (upstream's).
	MacvlanModes = []NamedMode[netlink.MacvlanMode]{
		{netlink.MACVLAN_MODE_BRIDGE, "bridge"},
		{netlink.MACVLAN_MODE_PRIVATE, "private"},
		{netlink.MACVLAN_MODE_VEPA, "vepa"},
		{netlink.MACVLAN_MODE_PASSTHRU, "passthru"},
	}
	// otherMacvlanModes are the macvlan modes only another tool sets,
	// named by CHECK.
	otherMacvlanModes = []NamedMode[netlink.MacvlanMode]{
		{netlink.MACVLAN_MODE_DEFAULT, "default"},
		{netlink.MACVLAN_MODE_SOURCE, "source"},
	}
	// IPVlanModes are the modes ipvlan's "mode" takes (upstream's).
	IPVlanModes = []NamedMode[netlink.IPVlanMode]{
		{netlink.IPVLAN_MODE_L2, "l2"},
		{netlink.IPVLAN_MODE_L3, "l3"},
		{netlink.IPVLAN_MODE_L3S, "l3s"},
	}
)

// ParseMode looks the "mode" key up in modes, def when it is empty, and names
// every choice when it is not there (code 7). It returns the mode's name
// and value.
func ParseMode[M comparable](mode, def string, modes []NamedMode[M]) (string, M, error) {
	if mode == "" {
		mode = def
	}
	names := make([]string, 0, len(modes))
	for _, md := range modes {
		if md.Name == mode {
			return mode, md.Mode, nil
		}
		names = append(names, md.Name)
	}
	sort.Strings(names)
	var zero M
	return mode, zero, result.InvalidConfig(fmt.Errorf("mode: %q is not one of %s", mode, strings.Join(names, ", ")))
}

// modeName returns m's name in the first of tables that lists it, "" when
// none does.
func modeName[M comparable](m M, tables ...[]NamedMode[M]) string {
	for _, modes := range tables {
		for _, md := range modes {
			if md.Mode == m {
				return md.Name
			}
		}
	}
	return ""
}
