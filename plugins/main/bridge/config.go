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
// A "vlanTrunk" key present but empty turns it on too, as upstream's does.
func (c *config) vlanFiltering() bool { return c.Vlan != 0 || c.VlanTrunk != nil }

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
	// The native vlan may lie in a trunk range, as upstream allows: it is
	// added last, so the port carries it untagged (and as pvid), every
	// other vlan of the range tagged.
	for i, t := range c.VlanTrunk {
		rs, err := t.ranges()
		if err != nil {
			return fmt.Errorf("vlanTrunk[%d]: %w", i, err)
		}
		c.trunks = append(c.trunks, rs...)
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

// ranges are the vlans of one vlanTrunk entry, as upstream reads it: the
// range "minID"-"maxID" (both or neither), and the vlan "id", either or
// both; an entry with neither adds none.
func (t *vlanTrunk) ranges() ([][2]int, error) {
	if t == nil {
		return nil, errors.New("null entry")
	}
	inRange := func(key string, v int) error {
		if v < 1 || v > 4094 {
			return fmt.Errorf("%s: %d out of range 1-4094", key, v)
		}
		return nil
	}
	var out [][2]int
	switch {
	case t.MinID != nil && t.MaxID != nil:
		if err := inRange("minID", *t.MinID); err != nil {
			return nil, err
		}
		if err := inRange("maxID", *t.MaxID); err != nil {
			return nil, err
		}
		if *t.MinID > *t.MaxID {
			return nil, fmt.Errorf("minID %d is greater than maxID %d", *t.MinID, *t.MaxID)
		}
		out = append(out, [2]int{*t.MinID, *t.MaxID})
	case t.MinID != nil || t.MaxID != nil:
		return nil, errors.New(`"minID" and "maxID" go together`)
	}
	if t.ID != nil {
		if err := inRange("id", *t.ID); err != nil {
			return nil, err
		}
		out = append(out, [2]int{*t.ID, *t.ID})
	}
	return out, nil
}
