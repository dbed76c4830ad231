package link

import (
	"fmt"
	"sort"
	"strings"

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
// reports whether its ipam asks for addresses (see Layer3). Pure.
func (k Keys) Validate(c *attach.NetConf) (layer3 bool, err error) {
	if k.Master != "" {
		if err := attach.ValidateIfName("master", k.Master); err != nil {
			return false, err
		}
	}
	if err := attach.ValidateMTU(k.MTU); err != nil {
		return false, err
	}
	return Layer3(c)
}

// ParseMode looks the "mode" key up in modes, def when it is empty, and names
// every choice when it is not there (code 7). It returns the mode's name
// and value.
func ParseMode[M any](mode, def string, modes map[string]M) (string, M, error) {
	if mode == "" {
		mode = def
	}
	m, ok := modes[mode]
	if !ok {
		names := make([]string, 0, len(modes))
		for n := range modes {
			names = append(names, n)
		}
		sort.Strings(names)
		return mode, m, result.InvalidConfig(fmt.Errorf("mode: %q is not one of %s", mode, strings.Join(names, ", ")))
	}
	return mode, m, nil
}
