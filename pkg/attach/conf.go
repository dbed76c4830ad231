package attach

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/cniforge/plugins/pkg/owner"
	"github.com/cniforge/plugins/pkg/result"
)

// Conf is a plugin's parsed config: a struct embedding NetConf, so that the
// frame reaches the common keys through Common.
type Conf interface {
	Common() *NetConf
}

// NetConf holds the keys every plugin shares (name, cniVersion, type, ipam,
// dns) and the stdin they came from. A plugin's config embeds it.
type NetConf struct {
	types.NetConf
	// RawPrev shadows types.NetConf's prevResult (a map), so that a
	// prevResult of any shape or version decodes: it is parsed only by the
	// verbs that need it (ADD of a chained plugin, CHECK), never by DEL,
	// which must clean up whatever prevResult says.
	RawPrev json.RawMessage `json:"prevResult,omitempty"`
	// Raw is stdin as the runtime sent it, handed to IPAM as is.
	Raw []byte `json:"-"`
}

// Common returns c; a config embedding NetConf satisfies Conf through it.
func (c *NetConf) Common() *NetConf { return c }

// HasIPAM reports whether the config names an IPAM plugin.
func (c *NetConf) HasIPAM() bool { return c.IPAM.Type != "" }

// Prev parses prevResult and returns it as a current result, or nil when
// there is none. Errors carry code 6.
func (c *NetConf) Prev() (*current.Result, error) {
	if len(c.RawPrev) == 0 || string(c.RawPrev) == "null" {
		return nil, nil
	}
	nc := c.NetConf
	if err := json.Unmarshal(c.RawPrev, &nc.RawPrevResult); err != nil {
		return nil, result.Decoding(fmt.Errorf("prevResult: %w", err))
	}
	return result.ParsePrev(&nc)
}

// RequirePrev is Prev for a verb that cannot run without prevResult: code
// 7 with the message missing when there is none (say which plugin needs
// it, and why), code 6 when it does not parse.
func (c *NetConf) RequirePrev(missing string) (*current.Result, error) {
	prev, err := c.Prev()
	if err != nil {
		return nil, err
	}
	if prev == nil {
		return nil, result.InvalidConfig(errors.New(missing))
	}
	return prev, nil
}

// Decode decodes stdin into conf (code 6 when it is not JSON, code 7
// naming the key and value when a value has the wrong type or range: see
// result.DecodeConfig), keeps stdin in conf.Common().Raw and checks what every config
// needs: a name, and an IPAM type that is a plugin name (code 7). It
// touches no kernel state.
func Decode(stdin []byte, conf Conf) error {
	if err := result.DecodeConfig(stdin, conf); err != nil {
		return err
	}
	c := conf.Common()
	c.Raw = stdin
	if c.Name == "" {
		return result.InvalidConfig(errors.New("name: missing"))
	}
	if c.HasIPAM() {
		if err := result.ValidateIPAMType(c.IPAM.Type); err != nil {
			return result.InvalidConfig(err)
		}
	}
	return nil
}

// DecodeOnly is a Lenient parse for a plugin whose DEL uses no key of its
// own (it finds its state by CNI_IFNAME and the attachment's owner): the
// config decoded, nothing checked. Use it as Lenient: DecodeOnly[config].
func DecodeOnly[T any, PT interface {
	*T
	Conf
}](args *skel.CmdArgs) (PT, error) {
	c := PT(new(T))
	if err := Decode(args.StdinData, c); err != nil {
		return nil, err
	}
	return c, nil
}

// RequireIPAM refuses a config without an IPAM plugin (code 7) and tells
// "no ipam at all" from "ipam without a type": the fix differs.
func RequireIPAM(c *NetConf, why string) error {
	if c.HasIPAM() {
		return nil
	}
	var raw struct {
		IPAM json.RawMessage `json:"ipam"`
	}
	_ = json.Unmarshal(c.Raw, &raw) // decoded successfully by Decode
	if len(raw.IPAM) == 0 || string(raw.IPAM) == "null" {
		return result.InvalidConfig(fmt.Errorf("ipam: missing (%s)", why))
	}
	return result.InvalidConfig(errors.New("ipam.type: missing"))
}

// Masq holds the masquerade keys, shared by every plugin that offers
// source NAT. A config embeds it; the frame then tears its rules down on
// DEL and collects them on GC whatever the config says now.
type Masq struct {
	// IPMasq installs source NAT for traffic leaving the container's
	// addresses for destinations outside their subnet.
	IPMasq bool `json:"ipMasq"`
	// IPMasqBackend is "iptables" or "nftables"; absent picks iptables
	// unless it is unusable and nftables works.
	IPMasqBackend *string `json:"ipMasqBackend,omitempty"`
	// IPMasqExcludeCIDRs (beyond upstream, whose keys cannot express it)
	// lists destinations that are not masqueraded either, besides the
	// container's subnet: a cluster's pod CIDR, so that a pod on another
	// node sees the pod's own address (Kubernetes' network model: no NAT
	// between pods). Upstream's plugins ignore the key.
	IPMasqExcludeCIDRs []string `json:"ipMasqExcludeCIDRs,omitempty"`
}

// MasqConf returns m; a config embedding Masq offers masquerade through it.
func (m *Masq) MasqConf() *Masq { return m }

// Backend is the masquerade backend's name: "iptables", "nftables", or ""
// for the default.
func (m *Masq) Backend() string {
	if m.IPMasqBackend == nil {
		return ""
	}
	return *m.IPMasqBackend
}

// ExcludedCIDRs returns ipMasqExcludeCIDRs as networks (their addresses
// masked: "10.88.1.5/16" is 10.88.0.0/16). Entries Validate refuses are
// left out.
func (m *Masq) ExcludedCIDRs() []*net.IPNet {
	var out []*net.IPNet
	for _, s := range m.IPMasqExcludeCIDRs {
		if _, n, err := net.ParseCIDR(s); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// Validate checks ipMasqBackend: absent, "iptables" or "nftables" (an
// empty string is refused, as upstream refuses it); and each entry of
// ipMasqExcludeCIDRs: a CIDR with a prefix length above 0 (a /0 would
// exclude everything: that is ipMasq false).
func (m *Masq) Validate() error {
	if b := m.IPMasqBackend; b != nil && *b != backendIPTables && *b != backendNFTables {
		return result.InvalidConfig(fmt.Errorf("ipMasqBackend: %q is not %q or %q", *b, backendIPTables, backendNFTables))
	}
	for i, s := range m.IPMasqExcludeCIDRs {
		_, n, err := net.ParseCIDR(s)
		if err != nil {
			return result.InvalidConfig(fmt.Errorf("ipMasqExcludeCIDRs[%d]: %q is not a CIDR (such as 10.88.0.0/16)", i, s))
		}
		if ones, _ := n.Mask.Size(); ones == 0 {
			return result.InvalidConfig(fmt.Errorf("ipMasqExcludeCIDRs[%d]: %q excludes every destination (set ipMasq false instead)", i, s))
		}
	}
	return nil
}

// The backend names ipMasqBackend takes (pkg/netfilter's BackendIPTables
// and BackendNFTables; the frame links no netfilter code to name them).
const (
	backendIPTables = "iptables"
	backendNFTables = "nftables"
)

// masqer is a config that embeds Masq.
type masqer interface{ MasqConf() *Masq }

// Masquerade is what the frame does with the masquerade of a config that
// embeds Masq, whatever the config says now: tear down an attachment's
// rules on both backends (DEL), collect a network's rules of owners not
// kept (GC), and say whether the configured backend works here (STATUS).
// Each acts in the calling thread's namespace, the plugin's host
// namespace. The plugin passes it in Plugin.Masq (pkg/attach/masquerade's
// Frame); ADD and CHECK use that package's Start, Prepare and Check.
type Masquerade interface {
	TeardownAll(o owner.Owner) error
	GCAll(network string, keep []owner.Owner) error
	Usable(backend string) error
}

// MTU bounds: below 68 IPv4 cannot work (the kernel refuses it), above
// 65535 no link type takes it.
const (
	MinMTU = 68
	MaxMTU = 65535
)

// ValidateMTU checks the "mtu" key: 0 (the kernel default) or 68-65535.
func ValidateMTU(mtu int) error {
	if mtu != 0 && (mtu < MinMTU || mtu > MaxMTU) {
		return result.InvalidConfig(fmt.Errorf("mtu: %d out of range %d-%d (0 keeps the kernel default)", mtu, MinMTU, MaxMTU))
	}
	return nil
}

// ValidateIfName applies the kernel's rules for an interface name given in
// the config under key (code 7 naming key and value): at most 15 bytes, not
// "." or "..", no '/', ':', whitespace or NUL. '%' is refused too: the
// kernel reads a name with '%' as a pattern ("eth%d") to fill in, so the
// link would not get the name asked for.
func ValidateIfName(key, name string) error {
	var why string
	switch {
	case name == "":
		why = "is empty"
	case len(name) > 15:
		why = "is longer than 15 bytes"
	case name == "." || name == "..":
		why = "is not a valid interface name"
	case strings.ContainsAny(name, "/: \t\n\v\f\r\x00"):
		why = `contains '/', ':', whitespace or NUL`
	case strings.Contains(name, "%"):
		why = `contains '%', which the kernel reads as a pattern`
	default:
		return nil
	}
	return result.InvalidConfig(fmt.Errorf("%s: %q %s", key, name, why))
}
