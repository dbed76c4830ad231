package tap

import (
	"fmt"
	"net"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/link"
	"github.com/cniforge/plugins/pkg/result"
)

// netConf is tap's config. Keys and defaults are upstream's.
type netConf struct {
	attach.NetConf
	// MAC of the tap; "" lets the kernel pick one. runtimeConfig.mac,
	// args.cni.mac and CNI_ARGS MAC take precedence.
	MAC string `json:"mac,omitempty"`
	// MTU of the tap; 0 keeps the kernel default.
	MTU int `json:"mtu"`
	// MultiQueue makes a multi-queue tap (IFF_MULTI_QUEUE): the VMM opens
	// one queue per vCPU.
	MultiQueue bool `json:"multiQueue"`
	// Owner and Group, when set, may open the tap without CAP_NET_ADMIN.
	Owner *uint32 `json:"owner,omitempty"`
	Group *uint32 `json:"group,omitempty"`
	// SelinuxContext labels the tun socket (the tap) when SELinux is on.
	SelinuxContext string `json:"selinuxContext,omitempty"`
	// Bridge, when set, is an existing bridge in the container namespace
	// the tap becomes a port of.
	Bridge string `json:"bridge,omitempty"`

	// args.cni.mac and runtimeConfig.mac (capability "mac").
	link.MACArgs
}

// config is a validated netConf with what is derived from it.
type config struct {
	netConf
	// mac is the tap's MAC, nil to let the kernel pick.
	mac net.HardwareAddr
}

func parse(args *skel.CmdArgs) (*config, error) { return parseConfig(args.StdinData, args.Args) }

// parseConfig decodes stdin and CNI_ARGS and validates every key, the same
// way for every command. It touches no kernel state and leaves prevResult
// unparsed. Errors carry CNI codes: 6 undecodable, 4 bad CNI_ARGS, 7 an
// invalid value (naming key and value).
func parseConfig(stdin []byte, cniArgs string) (*config, error) {
	c := &config{}
	if err := attach.Decode(stdin, &c.netConf); err != nil {
		return nil, err
	}
	if err := attach.ValidateMTU(c.MTU); err != nil {
		return nil, err
	}
	if c.Bridge != "" {
		if err := attach.ValidateIfName("bridge", c.Bridge); err != nil {
			return nil, err
		}
	}
	for _, k := range []struct {
		key string
		id  *uint32
	}{{"owner", c.Owner}, {"group", c.Group}} {
		// The kernel reads (uid_t)-1 as "no owner": refuse it rather than
		// silently make a tap only CAP_NET_ADMIN can open.
		if k.id != nil && *k.id == ^uint32(0) {
			return nil, result.InvalidConfig(fmt.Errorf("%s: %d is not a valid id (leave %s out for none)", k.key, *k.id, k.key))
		}
	}
	if err := validateSELinuxContext(c.SelinuxContext); err != nil {
		return nil, err
	}
	// runtimeConfig.mac, then args.cni.mac, then CNI_ARGS MAC, then mac.
	mac, err := link.PickMAC(c.Sources(c.MAC), cniArgs)
	if err != nil {
		return nil, err
	}
	c.mac = mac
	return c, nil
}

// validateSELinuxContext checks the shape of a label, user:role:type with
// an optional :level, whether or not SELinux is on here: a config that
// works on one node must not fail on the next only because SELinux is on
// there.
func validateSELinuxContext(label string) error {
	if label == "" {
		return nil
	}
	parts := strings.SplitN(label, ":", 4)
	bad := len(parts) < 3 || strings.ContainsAny(label, "/ \t\n\x00")
	for _, p := range parts[:min(len(parts), 3)] {
		bad = bad || p == ""
	}
	if bad {
		return result.InvalidConfig(fmt.Errorf("selinuxContext: %q is not an SELinux label (user:role:type[:level])", label))
	}
	return nil
}
