package link

import (
	"errors"
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/cniforge/plugins/pkg/result"
)

// MACSources are the places a container MAC can come from, besides
// CNI_ARGS, as the config holds them ("" = not set).
type MACSources struct {
	RuntimeConfig string // runtimeConfig.mac (capability "mac")
	ArgsCNI       string // args.cni.mac
	Key           string // the plugin's own "mac" key (macvlan, tap)
}

// MACArgs are the config keys MACSources reads, for a plugin config to
// embed: "args": {"cni": {"mac": ...}} and "runtimeConfig": {"mac": ...}.
// A plugin with other runtimeConfig keys declares its own fields instead.
type MACArgs struct {
	Args struct {
		Cni struct {
			MAC string `json:"mac,omitempty"`
		} `json:"cni"`
	} `json:"args"`
	RuntimeConfig struct {
		MAC string `json:"mac,omitempty"`
	} `json:"runtimeConfig"`
}

// Sources returns the MACSources of m with the plugin's "mac" key.
func (m *MACArgs) Sources(key string) MACSources {
	return MACSources{RuntimeConfig: m.RuntimeConfig.MAC, ArgsCNI: m.Args.Cni.MAC, Key: key}
}

// envMAC is the CNI_ARGS key PickMAC reads.
type envMAC struct {
	types.CommonArgs
	MAC types.UnmarshallableString `json:"mac,omitempty"`
}

// PickMAC returns the container MAC, nil when no source sets one (the
// kernel picks): runtimeConfig.mac, else args.cni.mac, else CNI_ARGS MAC,
// else the "mac" key, as upstream orders them. A MAC that is not a 6-byte
// unicast ethernet address is refused naming its source and value: code 4
// when it came from CNI_ARGS (as is CNI_ARGS that does not parse), else 7.
// It is pure.
func PickMAC(src MACSources, cniArgs string) (net.HardwareAddr, error) {
	var env envMAC
	if err := types.LoadArgs(cniArgs, &env); err != nil {
		return nil, result.InvalidEnv(fmt.Errorf("CNI_ARGS: %w", err))
	}
	var from, val string
	switch {
	case src.RuntimeConfig != "":
		from, val = "runtimeConfig.mac", src.RuntimeConfig
	case src.ArgsCNI != "":
		from, val = "args.cni.mac", src.ArgsCNI
	case env.MAC != "":
		from, val = "CNI_ARGS MAC", string(env.MAC)
	case src.Key != "":
		from, val = "mac", src.Key
	default:
		return nil, nil
	}
	mac, err := ParseUnicastMAC(val)
	if err != nil {
		err = fmt.Errorf("%s: %q: %w", from, val, err)
		if from == "CNI_ARGS MAC" {
			return nil, result.InvalidEnv(err)
		}
		return nil, result.InvalidConfig(err)
	}
	return mac, nil
}

// ParseUnicastMAC parses a 6-byte unicast ethernet address: the kernel
// refuses a multicast one for a link, and a 20-byte InfiniBand one is no
// ethernet address.
func ParseUnicastMAC(s string) (net.HardwareAddr, error) {
	mac, err := net.ParseMAC(s)
	if err != nil {
		return nil, err
	}
	if len(mac) != 6 {
		return nil, errors.New("not a 6-byte ethernet address")
	}
	if mac[0]&1 != 0 {
		return nil, errors.New("is a multicast address")
	}
	return mac, nil
}
