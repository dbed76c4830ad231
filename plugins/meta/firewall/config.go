package firewall

import (
	"fmt"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/netfilter/forward"
	"github.com/cniforge/plugins/pkg/result"
)

// Backends, as the backend key names them.
const (
	backendIPTables  = "iptables"
	backendNFTables  = "nftables"
	backendFirewalld = "firewalld"
)

// netConf is firewall's config. Keys and defaults are upstream's, plus
// backend "nftables".
type netConf struct {
	attach.NetConf
	// Backend is "iptables", "firewalld", "nftables", or ""/absent (Podman
	// sends ""), which means firewalld when it answers on the system bus,
	// else iptables.
	Backend string `json:"backend"`
	// AdminChain is iptablesAdminChainName (default CNI-ADMIN).
	AdminChain string `json:"iptablesAdminChainName"`
	// Zone is firewalldZone (default trusted).
	Zone string `json:"firewalldZone"`
	// IngressPolicy is "open" (default), "same-bridge" or "isolated".
	IngressPolicy forward.IngressPolicy `json:"ingressPolicy"`
	// MarkBit is nftablesMarkBit (0-31, default 12): the bit of the packet
	// mark the nftables backend's accepts set, for drop policies elsewhere
	// to let through (README).
	MarkBit *int `json:"nftablesMarkBit"`

	// unknownBackend is a "backend" value none of the above, taken as
	// absent (ADD logs it).
	unknownBackend string
}

func parse(args *skel.CmdArgs) (*netConf, error) { return parseConfig(args.StdinData) }

// parseLenient is DEL's parse of a config that no longer validates: DEL
// removes the attachment's rules of every backend by owner, and firewalld
// sources unless the backend is iptables, so no value is checked; the
// defaults still apply (firewalldZone).
func parseLenient(args *skel.CmdArgs) (*netConf, error) {
	c := &netConf{}
	if err := attach.Decode(args.StdinData, c); err != nil {
		return nil, err
	}
	_ = c.defaultAndValidate() // best effort: DEL uses only what it defaulted
	return c, nil
}

// parseConfig decodes, defaults and validates stdin, the same way for every
// command. It touches no kernel state and leaves prevResult unparsed.
func parseConfig(stdin []byte) (*netConf, error) {
	c := &netConf{}
	if err := attach.Decode(stdin, c); err != nil {
		return nil, err
	}
	if err := c.defaultAndValidate(); err != nil {
		return nil, err
	}
	return c, nil
}

// defaultAndValidate fills in every default, then checks every value.
func (c *netConf) defaultAndValidate() error {
	if c.AdminChain == "" {
		c.AdminChain = forward.DefaultAdminChain
	}
	if c.MarkBit == nil {
		c.MarkBit = new(forward.DefaultMarkBit)
	}
	if c.Zone == "" {
		c.Zone = "trusted"
	}
	if c.IngressPolicy == "" {
		c.IngressPolicy = forward.IngressOpen
	}
	switch c.Backend {
	case "", backendIPTables, backendNFTables, backendFirewalld:
	default:
		// Upstream's getBackend takes any other value as absent: firewalld
		// when it runs, else iptables. ADD says so.
		c.unknownBackend, c.Backend = c.Backend, ""
	}
	// iptables chain names: at most 28 bytes (XT_EXTENSION_MAXNAMELEN less
	// the NUL), no blanks, and not an option or a target of iptables' own.
	if n := len(c.AdminChain); n > 28 || strings.ContainsAny(c.AdminChain, " \t\n\"'!") || strings.HasPrefix(c.AdminChain, "-") ||
		isBuiltinTarget(c.AdminChain) {
		return result.InvalidConfig(fmt.Errorf("iptablesAdminChainName: %q is not a usable iptables chain name (at most 28 bytes, no blanks or quotes, not a built-in target)", c.AdminChain))
	}
	if *c.MarkBit < 0 || *c.MarkBit > 31 {
		return result.InvalidConfig(fmt.Errorf("nftablesMarkBit: %d out of range 0-31", *c.MarkBit))
	}
	switch c.IngressPolicy {
	case forward.IngressOpen, forward.IngressSameBridge, forward.IngressIsolated:
	default:
		return result.InvalidConfig(fmt.Errorf("ingressPolicy: %q is not %q, %q or %q", c.IngressPolicy,
			forward.IngressOpen, forward.IngressSameBridge, forward.IngressIsolated))
	}
	return nil
}

func isBuiltinTarget(s string) bool {
	switch s {
	case "ACCEPT", "DROP", "RETURN", "QUEUE", "INPUT", "OUTPUT", "FORWARD", "PREROUTING", "POSTROUTING", "CNI-FORWARD":
		return true
	}
	return false
}
