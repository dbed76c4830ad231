package ptp

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/cniforge/plugins/pkg/ipam"
	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/result"
)

// netConf is ptp's config. Keys and defaults are upstream's.
type netConf struct {
	types.NetConf
	// IPMasq installs source NAT for traffic leaving the container's
	// addresses for destinations outside its subnet.
	IPMasq bool `json:"ipMasq"`
	// IPMasqBackend is "iptables" or "nftables"; unset picks iptables
	// unless it is unusable and nftables works.
	IPMasqBackend *string `json:"ipMasqBackend,omitempty"`
	// MTU of both veth ends; 0 keeps the kernel default.
	MTU int `json:"mtu"`

	prevResult *current.Result
}

// backend returns the masquerade backend name for netfilter.NewMasq
// ("" = the default).
func (c *netConf) backend() string {
	if c.IPMasqBackend == nil {
		return ""
	}
	return *c.IPMasqBackend
}

// Veth MTU bounds: below 68 IPv4 cannot work (the kernel refuses it), above
// 65535 veth refuses.
const (
	minMTU = 68
	maxMTU = 65535
)

// parseConfig decodes and validates stdin, the same way for every command.
// It touches no kernel state.
func parseConfig(stdin []byte) (*netConf, error) {
	conf := &netConf{}
	if err := json.Unmarshal(stdin, conf); err != nil {
		return nil, result.Decoding(fmt.Errorf("parse config: %w", err))
	}
	if conf.Name == "" {
		return nil, result.InvalidConfig(errors.New("name: missing"))
	}
	if conf.IPAM.Type == "" {
		// Tell "no ipam at all" from "ipam without a type": the fix differs.
		var raw struct {
			IPAM json.RawMessage `json:"ipam"`
		}
		_ = json.Unmarshal(stdin, &raw) // decoded successfully above
		if len(raw.IPAM) == 0 || string(raw.IPAM) == "null" {
			return nil, result.InvalidConfig(errors.New("ipam: missing (ptp needs an IPAM plugin to hand out addresses)"))
		}
	}
	if err := ipam.ValidateType(conf.IPAM.Type); err != nil {
		return nil, result.InvalidConfig(err)
	}
	if conf.MTU != 0 && (conf.MTU < minMTU || conf.MTU > maxMTU) {
		return nil, result.InvalidConfig(fmt.Errorf("mtu: %d out of range %d-%d (0 keeps the kernel default)", conf.MTU, minMTU, maxMTU))
	}
	if b := conf.IPMasqBackend; b != nil && *b != netfilter.BackendIPTables && *b != netfilter.BackendNFTables {
		return nil, result.InvalidConfig(fmt.Errorf("ipMasqBackend: %q is not %q or %q", *b, netfilter.BackendIPTables, netfilter.BackendNFTables))
	}
	prev, err := result.ParsePrev(&conf.NetConf)
	if err != nil {
		return nil, err
	}
	conf.prevResult = prev
	return conf, nil
}
