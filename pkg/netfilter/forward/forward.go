package forward

import (
	"errors"
	"fmt"
	"net"

	"github.com/cniforge/plugins/pkg/netfilter"
)

// The firewall plugin's forward filter: per container address, traffic
// from the container and replies to it may be forwarded, in front of
// whatever policy the host's FORWARD chain has; optional ingress policies
// drop traffic between bridges (same-bridge) and within one (isolated).
//
// iptables layout (filter table, per family), upstream's:
//
//	FORWARD (inserted at the top, the isolation jump before the other):
//	  -m comment --comment "CNI firewall plugin rules (ingressPolicy: same-bridge)" -j CNI-ISOLATION-STAGE-1
//	  -m comment --comment "CNI firewall plugin rules" -j CNI-FORWARD
//	CNI-FORWARD:
//	  -m comment --comment "CNI firewall plugin admin overrides" -j CNI-ADMIN   (always first)
//	  -d <ip>/32 -m conntrack --ctstate RELATED,ESTABLISHED -m comment --comment "<owner>" -j ACCEPT
//	  -s <ip>/32 -m comment --comment "<owner>" -j ACCEPT
//	CNI-ADMIN: the administrator's; created empty, never changed
//	CNI-ISOLATION-STAGE-1 (per bridge, before a final RETURN):
//	  -i <br> -o <br> -j DROP                      (isolated only)
//	  -i <br> ! -o <br> -j CNI-ISOLATION-STAGE-2
//	CNI-ISOLATION-STAGE-2: -o <br> -j DROP, then RETURN
//
// <owner> is the masquerade marker comment (network, container ID,
// interface name in hex), so GC can attribute the rules. Upstream writes
// the two per-address rules without a comment; Teardown removes that form
// too for the addresses it is given (DEL reads them from prevResult). The
// shared chains and the per-bridge isolation rules stay: other attachments
// use them.

// IngressPolicy is the firewall plugin's ingressPolicy.
type IngressPolicy string

const (
	IngressOpen       IngressPolicy = "open"
	IngressSameBridge IngressPolicy = "same-bridge"
	IngressIsolated   IngressPolicy = "isolated"
)

// DefaultAdminChain is the default iptablesAdminChainName.
const DefaultAdminChain = "CNI-ADMIN"

// ForwardRules is what one attachment's forward filter allows.
type ForwardRules struct {
	Owner      netfilter.Owner
	Addrs      []net.IP // the container's addresses
	AdminChain string   // "" means DefaultAdminChain
	Policy     IngressPolicy
	Bridge     string // the host bridge, for same-bridge and isolated
	// MarkBit is the bit of the packet mark the nftables backend's accepts
	// set (0-31; the plugin's default is DefaultMarkBit). iptables
	// ignores it.
	MarkBit int
}

func (r ForwardRules) admin() string {
	if r.AdminChain == "" {
		return DefaultAdminChain
	}
	return r.AdminChain
}

// Forward installs, checks and removes forward filter rules in the calling
// thread's network namespace.
type Forward interface {
	Backend() string
	// Setup installs r (idempotent, in place: a rule of r that is there
	// stays; one transaction per family). On error o's rules are as they
	// were before: what this call added is gone, what was there stays (a
	// fresh attachment: nothing is left).
	Setup(r ForwardRules) error
	// SetupUndoable is Setup that also returns undo, which takes o's rules
	// back to what they were before this call: an ADD's undo after a
	// later step failed. Over a live attachment (check --repair, a second
	// ADD) undo removes only what this call added, never the rules that
	// let its traffic through before.
	SetupUndoable(r ForwardRules) (undo func() error, err error)
	// Teardown removes o's rules, and upstream's uncommented rules for
	// addrs (which may be empty). Absent rules are success.
	Teardown(o netfilter.Owner, addrs []net.IP) error
	// Check verifies that r is installed; the error wraps ErrMissing.
	Check(r ForwardRules) error
	// GC removes the rules of network whose owner is not in keep.
	GC(network string, keep []netfilter.Owner) error
}

// NewForward returns the forward filter backend named backend
// (BackendIPTables or BackendNFTables).
func NewForward(backend string) (Forward, error) {
	switch backend {
	case netfilter.BackendIPTables:
		return newIPTablesForward(), nil
	case netfilter.BackendNFTables:
		return newNFTablesForward(), nil
	}
	return nil, fmt.Errorf("backend: %q: %w", backend, netfilter.ErrUnknownBackend)
}

// TeardownForwardAll removes o's forward rules from every backend that
// holds any (the backend of the ADD may not be known: config changed); an
// unusable backend holds none. The other errors of both are joined.
func TeardownForwardAll(o netfilter.Owner, addrs []net.IP) error {
	return errors.Join(
		ifUsable(newIPTablesForward().Teardown(o, addrs)),
		ifUsable(newNFTablesForward().Teardown(o, addrs)))
}

// GCForwardAll is GC on every backend.
func GCForwardAll(network string, keep []netfilter.Owner) error {
	return errors.Join(
		ifUsable(newIPTablesForward().GC(network, keep)),
		ifUsable(newNFTablesForward().GC(network, keep)))
}

// ifUsable reads "this backend cannot be used here" as success: it holds
// no rules then.
func ifUsable(err error) error {
	if errors.Is(err, netfilter.ErrUnavailable) {
		return nil
	}
	return err
}

// ForwardUsable reports, for STATUS, whether backend can be used here.
func ForwardUsable(backend string) error {
	switch backend {
	case netfilter.BackendIPTables:
		return newIPTablesForward().usable()
	case netfilter.BackendNFTables:
		return newNFTablesForward().usable()
	}
	return fmt.Errorf("backend: %q: %w", backend, netfilter.ErrUnknownBackend)
}
