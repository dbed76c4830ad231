package hostport

import (
	"errors"
	"fmt"
	"net"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// Port forwarding (the portmap plugin): DNAT of host ports to a container's
// address, for traffic destined to one of the host's own addresses only
// (CVE-2025-67499), with masquerade for hairpin and localhost traffic.
//
// Both backends keep upstream's layout, so a DEL from either suite removes
// what the other's ADD made:
//
//   - iptables: package hostport/ipt (nat chains CNI-HOSTPORT-DNAT,
//     CNI-DN-<hash>, CNI-HOSTPORT-SETMARK, CNI-HOSTPORT-MASQ; a raw-table
//     guard CNI-HOSTPORT-GUARD for route_localnet).
//   - nftables: package hostport/nft (tables "ip cni_hostport" and
//     "ip6 cni_hostport"; mappings are elements of verdict-free maps, so a
//     lookup costs the same for 1 or 1000 mappings).

// PortMapping is one host port forwarded to a container port.
type PortMapping struct {
	HostPort      int
	ContainerPort int
	Protocol      string // "tcp", "udp" or "sctp"
	HostIP        net.IP // nil: every local address
}

// PortMapOptions is everything Setup and Check need of one attachment.
type PortMapOptions struct {
	Owner netfilter.Owner
	// ContainerIPs are the container's addresses with their prefix
	// length, as prevResult gives them; per family the first one is the
	// DNAT target (as upstream), and hairpin traffic from anywhere in its
	// subnet is masqueraded (a neighbour on the same bridge, whose answer
	// would otherwise go straight back un-NATed). A nil Mask is a host
	// address (/32, /128).
	ContainerIPs []net.IPNet
	Mappings     []PortMapping
	// SNAT masquerades hairpin (container to its own host port) and
	// localhost (127.0.0.1:hostPort from the host) traffic.
	SNAT bool
	// MasqAll masquerades every forwarded connection, not only hairpin.
	MasqAll bool
	// MarkMasqBit is the bit of the packet mark that asks for masquerade
	// (iptables only; 0-31, upstream's default 13).
	MarkMasqBit int
	// ExternalSetMarkChain, when set, is the chain that marks packets for
	// masquerade (iptables only); CNI-HOSTPORT-SETMARK/MASQ are not made.
	ExternalSetMarkChain string
	// Conditions are extra iptables match arguments for the entry rules
	// in PREROUTING and OUTPUT, per family (iptables only).
	ConditionsV4, ConditionsV6 []string
}

// DefaultMarkMasqBit is upstream's markMasqBit.
const DefaultMarkMasqBit = 13

// ContainerIP returns the first container address of f, nil when none.
func (o PortMapOptions) ContainerIP(f nftnl.Family) net.IP {
	if n := o.containerNet(f); n != nil {
		if f == nftnl.IPv4 {
			return n.IP.To4()
		}
		return n.IP.To16()
	}
	return nil
}

// containerNet returns the first container address of f with its
// prefix, nil when none.
func (o PortMapOptions) containerNet(f nftnl.Family) *net.IPNet {
	for i := range o.ContainerIPs {
		if n := &o.ContainerIPs[i]; n.IP != nil && nftnl.FamilyOf(n.IP) == f {
			return n
		}
	}
	return nil
}

// HairpinNet returns the subnet hairpin traffic to the container of
// family f comes from: the network of its address (10.88.0.2/24 ->
// 10.88.0.0/24), as upstream's iptables rule matches it.
func (o PortMapOptions) HairpinNet(f nftnl.Family) *net.IPNet {
	n := o.containerNet(f)
	if n == nil {
		return nil
	}
	return nftnl.SubnetOf(n)
}

// MappingsFor returns the mappings that apply to family f: those without a
// hostIP and those whose hostIP is of f. A mapping applies only to the
// container address of its own family.
func (o PortMapOptions) MappingsFor(f nftnl.Family) []PortMapping {
	if o.ContainerIP(f) == nil {
		return nil
	}
	var out []PortMapping
	for _, m := range o.Mappings {
		if m.HostIP != nil && nftnl.FamilyOf(m.HostIP) != f {
			continue // 0.0.0.0 is IPv4 only, :: IPv6 only
		}
		out = append(out, m)
	}
	return out
}

// HostAddr returns m's host address for a rule, nil for "any".
func (m PortMapping) HostAddr() net.IP {
	if m.HostIP == nil || m.HostIP.IsUnspecified() {
		return nil
	}
	if ip4 := m.HostIP.To4(); ip4 != nil {
		return ip4
	}
	return m.HostIP.To16()
}

// ValidateMapping checks one mapping; the error names the field.
func ValidateMapping(m PortMapping) error {
	if m.HostPort < 1 || m.HostPort > 65535 {
		return fmt.Errorf("hostPort: %d out of range 1-65535", m.HostPort)
	}
	if m.ContainerPort < 1 || m.ContainerPort > 65535 {
		return fmt.Errorf("containerPort: %d out of range 1-65535", m.ContainerPort)
	}
	switch m.Protocol {
	case "tcp", "udp", "sctp":
	default:
		return fmt.Errorf("protocol: %q (want tcp, udp or sctp)", m.Protocol)
	}
	return nil
}

// ErrPortMapMissing is returned (wrapped) by PortMap.Check when a rule,
// chain or map element of the attachment is missing.
var ErrPortMapMissing = errors.New("port mapping rule missing")

// PortMap installs, checks and removes an attachment's port forwards.
// All methods act on the calling thread's network namespace.
type PortMap interface {
	Backend() string
	// Setup installs the forwards of opts, replacing any of opts.Owner's
	// that differ (in place: a rule that is there stays). On error the
	// attachment's forwards are as they were before: what this call
	// added is gone, what was there stays (a fresh attachment: nothing
	// is left).
	Setup(opts PortMapOptions) error
	// SetupUndoable is Setup that also returns undo, which takes the
	// attachment's forwards back to what they were before this call: an
	// ADD's undo after a later step failed. Over a live attachment
	// (check --repair, a second ADD) undo removes only what this call
	// added, never forwards that carried traffic before it.
	SetupUndoable(opts PortMapOptions) (undo func() error, err error)
	// Teardown removes every forward of o (made by either suite) and
	// returns the container addresses they pointed to. Absent is success.
	Teardown(o netfilter.Owner) ([]net.IP, error)
	// Check verifies the forwards of opts are present (ErrPortMapMissing).
	Check(opts PortMapOptions) error
	// GC removes the forwards of network whose owner is not in keep.
	GC(network string, keep []netfilter.Owner) error
	// Usable reports whether the backend can be used here (ErrUnavailable).
	Usable() error
}

// CapMissing keeps an error about many missing mappings readable: the
// first ten, then how many more.
func CapMissing(errs []error) []error {
	const keep = 10
	if len(errs) <= keep {
		return errs
	}
	return append(errs[:keep:keep], fmt.Errorf("%w: and %d more", ErrPortMapMissing, len(errs)-keep))
}
