package portmap

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/hostport"
	"github.com/cniforge/plugins/pkg/result"
)

// portMapEntry is one element of runtimeConfig.portMappings, upstream's keys.
type portMapEntry struct {
	HostPort      int    `json:"hostPort"`
	ContainerPort int    `json:"containerPort"`
	Protocol      string `json:"protocol"`
	HostIP        string `json:"hostIP,omitempty"`
}

// netConf is portmap's config. Keys and defaults are upstream's.
type netConf struct {
	attach.NetConf
	Backend              *string   `json:"backend,omitempty"`
	SNAT                 *bool     `json:"snat,omitempty"`
	MasqAll              bool      `json:"masqAll,omitempty"`
	MarkMasqBit          *int      `json:"markMasqBit,omitempty"`
	ExternalSetMarkChain *string   `json:"externalSetMarkChain,omitempty"`
	ConditionsV4         *[]string `json:"conditionsV4,omitempty"`
	ConditionsV6         *[]string `json:"conditionsV6,omitempty"`
	RuntimeConfig        struct {
		PortMaps []portMapEntry `json:"portMappings,omitempty"`
	} `json:"runtimeConfig,omitempty"`

	// Derived by parseConfig.
	backend  string // "", iptables or nftables ("" = upstream's default)
	mappings []hostport.PortMapping
	// markMasqBitUnused: markMasqBit given with backend nftables, which
	// does not use it (ADD logs it).
	markMasqBitUnused bool
}

func parse(args *skel.CmdArgs) (*netConf, error) { return parseConfig(args.StdinData) }

// parseConfig decodes, defaults and validates stdin the same way for every
// command. It touches no kernel state and leaves prevResult unparsed.
func parseConfig(stdin []byte) (*netConf, error) {
	c := &netConf{}
	if err := attach.Decode(stdin, c); err != nil {
		return nil, err
	}
	if err := c.validate(); err != nil {
		return nil, result.InvalidConfig(err)
	}
	return c, nil
}

func (c *netConf) validate() error {
	if c.Backend != nil {
		switch *c.Backend {
		case netfilter.BackendIPTables, netfilter.BackendNFTables:
			c.backend = *c.Backend
		default:
			return fmt.Errorf("backend: %q (want %q or %q)", *c.Backend, netfilter.BackendIPTables, netfilter.BackendNFTables)
		}
	}
	if c.MarkMasqBit != nil && (*c.MarkMasqBit < 0 || *c.MarkMasqBit > 31) {
		return fmt.Errorf("markMasqBit: %d out of range 0-31", *c.MarkMasqBit)
	}
	if c.MarkMasqBit != nil && c.ExternalSetMarkChain != nil {
		return errors.New("markMasqBit and externalSetMarkChain: set only one (the external chain does its own marking)")
	}
	if c.ExternalSetMarkChain != nil && *c.ExternalSetMarkChain == "" {
		return errors.New(`externalSetMarkChain: ""`)
	}
	// Upstream's default (detectBackendOfConditions): conditions in nft
	// syntax (not starting with "-" or "!") pick nftables.
	nftSyntax := false
	for key, conds := range map[string]*[]string{"conditionsV4": c.ConditionsV4, "conditionsV6": c.ConditionsV6} {
		if conds == nil {
			continue
		}
		// iptables conditions are argument lists ("-s", "10.0.0.0/8",
		// "!", "-d", ...): the first one is an option or a negation.
		if len(*conds) > 0 {
			if first := strings.TrimSpace((*conds)[0]); !strings.HasPrefix(first, "-") && !strings.HasPrefix(first, "!") {
				nftSyntax = true
			}
		}
		for i, cond := range *conds {
			if strings.ContainsAny(cond, "\n\r") {
				return fmt.Errorf("%s: %q holds a line break", key, cond)
			}
			if strings.TrimSpace(cond) == "" {
				return fmt.Errorf("%s[%d]: empty", key, i)
			}
		}
	}
	if nftSyntax && c.backend == "" {
		c.backend = netfilter.BackendNFTables
	}
	if nftSyntax && c.backend == netfilter.BackendIPTables {
		// iptables would take the words as its arguments and fail
		// half-way through the rules.
		return errors.New(`conditionsV4/conditionsV6: nft syntax (not starting with "-" or "!"), but backend is "iptables"`)
	}
	if c.backend == netfilter.BackendNFTables {
		switch {
		case nftSyntax || c.ConditionsV4 != nil && len(*c.ConditionsV4) > 0 || c.ConditionsV6 != nil && len(*c.ConditionsV6) > 0:
			return errors.New("conditionsV4/conditionsV6: not supported with the nftables backend (rules are made over netlink, not by nft)")
		case c.MarkMasqBit != nil:
			// Upstream's nftables backend has no use for it and says
			// nothing; ADD says so.
			c.markMasqBitUnused = true
		case c.ExternalSetMarkChain != nil:
			return errors.New("externalSetMarkChain: iptables only (backend is nftables)")
		}
	}
	for i := range c.RuntimeConfig.PortMaps {
		m, err := c.mapping(i)
		if err != nil {
			return err
		}
		c.mappings = append(c.mappings, m)
	}
	return nil
}

// mapping is runtimeConfig.portMappings[i], checked.
func (c *netConf) mapping(i int) (hostport.PortMapping, error) {
	e := c.RuntimeConfig.PortMaps[i]
	m := hostport.PortMapping{HostPort: e.HostPort, ContainerPort: e.ContainerPort, Protocol: strings.ToLower(e.Protocol)}
	if m.Protocol == "" {
		m.Protocol = "tcp"
	}
	if e.HostIP != "" {
		if m.HostIP = net.ParseIP(e.HostIP); m.HostIP == nil {
			return m, fmt.Errorf("runtimeConfig.portMappings[%d].hostIP: %q is not an IP address", i, e.HostIP)
		}
	}
	if err := hostport.ValidateMapping(m); err != nil {
		return m, fmt.Errorf("runtimeConfig.portMappings[%d].%w", i, err)
	}
	return m, nil
}

// parseLenient is DEL's parse of a config that no longer validates: DEL
// removes the attachment's forwards on both backends by owner and needs
// only the mappings: one that no longer validates is left out of what DEL
// flushes from conntrack, and its forwards are found by owner.
func parseLenient(args *skel.CmdArgs) (*netConf, error) {
	c := &netConf{}
	if err := attach.Decode(args.StdinData, c); err != nil {
		return nil, err
	}
	for i := range c.RuntimeConfig.PortMaps {
		if m, err := c.mapping(i); err == nil {
			c.mappings = append(c.mappings, m)
		}
	}
	return c, nil
}

// options returns the netfilter options for owner and the container's
// addresses.
func (c *netConf) options(owner netfilter.Owner, ips []net.IPNet) hostport.PortMapOptions {
	o := hostport.PortMapOptions{
		Owner:        owner,
		ContainerIPs: ips,
		Mappings:     c.mappings,
		SNAT:         c.SNAT == nil || *c.SNAT,
		MasqAll:      c.MasqAll,
		MarkMasqBit:  hostport.DefaultMarkMasqBit,
	}
	if c.MarkMasqBit != nil {
		o.MarkMasqBit = *c.MarkMasqBit
	}
	if c.ExternalSetMarkChain != nil {
		o.ExternalSetMarkChain = *c.ExternalSetMarkChain
	}
	if c.ConditionsV4 != nil {
		o.ConditionsV4 = *c.ConditionsV4
	}
	if c.ConditionsV6 != nil {
		o.ConditionsV6 = *c.ConditionsV6
	}
	return o
}
