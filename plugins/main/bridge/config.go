package bridge

import (
	"errors"
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/link"
	"github.com/cniforge/plugins/pkg/result"
)

const defaultBridge = "cni0"

// netConf is the bridge plugin's config as the runtime sends it. Key names
// and defaults follow the upstream bridge plugin.
type netConf struct {
	attach.NetConf
	attach.Masq                            // ipMasq, ipMasqBackend
	Bridge                    string       `json:"bridge"`
	IsGateway                 bool         `json:"isGateway"`
	IsDefaultGateway          bool         `json:"isDefaultGateway"`
	ForceAddress              bool         `json:"forceAddress"`
	MTU                       int          `json:"mtu"`
	HairpinMode               bool         `json:"hairpinMode"`
	PromiscMode               bool         `json:"promiscMode"`
	Vlan                      int          `json:"vlan"`
	VlanTrunk                 []*vlanTrunk `json:"vlanTrunk"`
	PreserveDefaultVlan       bool         `json:"preserveDefaultVlan"`
	MacSpoofChk               bool         `json:"macspoofchk"`
	EnableDad                 bool         `json:"enabledad"`
	DisableContainerInterface bool         `json:"disableContainerInterface"`
	PortIsolation             bool         `json:"portIsolation"`

	link.MACArgs // args.cni.mac, runtimeConfig.mac
}

type vlanTrunk struct {
	ID    *int `json:"id"`
	MinID *int `json:"minID"`
	MaxID *int `json:"maxID"`
}

// config is a validated netConf with everything derived from it.
type config struct {
	netConf
	// layer3: IPAM is configured. "ipam": {} (or none) means layer 2 only.
	layer3 bool
	// mac is the container interface's MAC, nil to let the kernel pick.
	mac net.HardwareAddr
	// trunks are the vlanTrunk entries as [min, max] ranges.
	trunks [][2]int
}

// vlanFiltering reports whether the bridge needs 802.1Q filtering on.
func (c *config) vlanFiltering() bool { return c.Vlan != 0 || len(c.trunks) > 0 }

func parse(args *skel.CmdArgs) (*config, error) { return parseConfig(args.StdinData, args.Args) }

// parseConfig decodes stdin and CNI_ARGS, applies defaults and validates
// every key. It touches no kernel state and leaves prevResult unparsed.
// Errors carry CNI codes: 6 for undecodable input, 4 for bad CNI_ARGS, 7
// for invalid values (naming the key and value).
func parseConfig(stdin []byte, cniArgs string) (*config, error) {
	c := &config{}
	if err := attach.Decode(stdin, &c.netConf); err != nil {
		return nil, err
	}
	if err := c.validate(); err != nil {
		return nil, result.InvalidConfig(err)
	}
	// bridge has no "mac" key of its own.
	mac, err := link.PickMAC(c.MACArgs.Sources(""), cniArgs)
	if err != nil {
		return nil, err
	}
	c.mac = mac
	return c, nil
}

func (c *config) validate() error {
	if c.Bridge == "" {
		c.Bridge = defaultBridge
	}
	if err := attach.ValidateIfName("bridge", c.Bridge); err != nil {
		return err
	}
	if c.IsDefaultGateway {
		c.IsGateway = true
	}
	if c.HairpinMode && c.PromiscMode {
		return errors.New("promiscMode: true cannot be combined with hairpinMode: true")
	}
	if err := attach.ValidateMTU(c.MTU); err != nil {
		return err
	}
	if c.Vlan < 0 || c.Vlan > 4094 {
		return fmt.Errorf("vlan: %d out of range 0-4094", c.Vlan)
	}
	for i, t := range c.VlanTrunk {
		r, err := t.bounds()
		if err != nil {
			return fmt.Errorf("vlanTrunk[%d]: %w", i, err)
		}
		if c.Vlan != 0 && c.Vlan >= r[0] && c.Vlan <= r[1] {
			return fmt.Errorf("vlanTrunk[%d]: range %d-%d contains the native vlan %d", i, r[0], r[1], c.Vlan)
		}
		c.trunks = append(c.trunks, r)
	}
	if err := c.Masq.Validate(); err != nil {
		return err
	}
	c.layer3 = c.HasIPAM()
	if c.DisableContainerInterface && c.layer3 {
		return fmt.Errorf("disableContainerInterface: true cannot be combined with ipam (type %q): addresses need an interface that is up", c.IPAM.Type)
	}
	return nil
}

func (t *vlanTrunk) bounds() ([2]int, error) {
	if t == nil {
		return [2]int{}, errors.New("null entry")
	}
	inRange := func(key string, v int) error {
		if v < 1 || v > 4094 {
			return fmt.Errorf("%s: %d out of range 1-4094", key, v)
		}
		return nil
	}
	if t.ID != nil {
		if t.MinID != nil || t.MaxID != nil {
			return [2]int{}, errors.New(`"id" cannot be combined with "minID"/"maxID"`)
		}
		if err := inRange("id", *t.ID); err != nil {
			return [2]int{}, err
		}
		return [2]int{*t.ID, *t.ID}, nil
	}
	if t.MinID == nil || t.MaxID == nil {
		return [2]int{}, errors.New(`needs "id", or both "minID" and "maxID"`)
	}
	if err := inRange("minID", *t.MinID); err != nil {
		return [2]int{}, err
	}
	if err := inRange("maxID", *t.MaxID); err != nil {
		return [2]int{}, err
	}
	if *t.MinID > *t.MaxID {
		return [2]int{}, fmt.Errorf("minID %d is greater than maxID %d", *t.MinID, *t.MaxID)
	}
	return [2]int{*t.MinID, *t.MaxID}, nil
}
