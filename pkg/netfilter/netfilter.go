// Package netfilter installs, checks and removes the rules of one CNI
// attachment, through iptables or through nftables, behind one interface
// per concern: masquerade (Masq, this file and iptables*.go/nftables*.go),
// port forwarding (PortMap, portmap*.go), the bridge's MAC spoof check
// (macspoof.go). The backends' helpers (iptables-save/-restore, chain
// locks, generation-consistent nftables reads, owner hashes) are shared.
//
// # Namespace
//
// Every function works on the netfilter state of the network namespace of
// the calling OS thread. A plugin calls them from its main goroutine (outside
// ns.NetNS.Do, so on a thread in the host namespace); tests call them inside
// (*ns.NetNS).Do of a namespace they made. The iptables backend execs
// iptables-restore/iptables-save, which inherit the thread's namespace; the
// nftables backend opens its netlink socket on the calling thread, so the
// socket lives in that thread's namespace too.
//
// # Ownership
//
// Rules belong to one attachment, identified by an Owner. The layout follows
// the upstream plugin suite so that a node can switch suites with pods
// running, and a DEL from either suite removes what the other's ADD made:
//
//   - iptables: nat table; a chain "CNI-" + the first 24 hex digits of
//     SHA-512(network + containerID); in POSTROUTING a jump to it per container
//     address; in the chain an ACCEPT for the container's subnet and a
//     MASQUERADE for everything but multicast. Every rule carries the comment
//     `name: "<network>" id: "<containerID>"`. The chain name cannot carry
//     the interface name, so two attachments of one container to one network
//     share a chain (as upstream). Each attachment therefore also puts in the
//     chain, per address, a marker: a rule with no target (a no-op) matching
//     "-s <address> -d <subnet>" with the comment
//     `name: "<network>" id: "<containerID>" if: <ifname in hex>` (hex
//     because interface names may hold quotes and backslashes, which
//     iptables-save escapes; the whole comment must fit in 255 bytes, which
//     Setup checks first). Setup merges
//     (other interfaces' markers and jumps stay, ACCEPTs for every subnet,
//     one MASQUERADE last); Teardown removes its own markers and jumps, and
//     the chain only when nothing else is in it. Each change holds a flock
//     on its chain (/run/cniforge/iptables/bucket-<hash>.lock, 256 files
//     shared by all chains) from its read to its write. Upstream's DEL deletes its
//     jump by exact spec and then flushes and deletes the chain, markers
//     included, so the jumps keep upstream's exact form. Upstream's ADD of
//     another interface appends its ACCEPT and MASQUERADE after ours; Check
//     accepts that. A chain with no
//     marker at all was made by upstream: Check does not ask for markers
//     there, and Teardown of any interface removes it whole, as upstream's
//     DEL does (upstream cannot tell its interfaces apart either).
//
//     Two consequences of unmarked (upstream-made) jumps, accepted as
//     such: (a) a repeated Teardown of an interface (its markers already
//     gone) in a chain that holds only unmarked jumps removes the whole
//     chain, the jumps of interfaces upstream attached included, exactly
//     as upstream's own DEL does; (b) GC never collects a stale unmarked jump
//     in a chain that still has a kept owner, since nothing says which
//     interface it belongs to (it and the chain's ACCEPTs stay until the
//     chain's last owner goes).
//
//   - nftables: table "inet cni_plugins_masquerade"; a base chain
//     "postrouting" (nat hook, priority srcnat) returns for multicast and
//     jumps to "masq_checks", which holds one rule per container address:
//     saddr = address, daddr != its subnet -> masquerade. Each rule's comment
//     (userdata, as nft shows it) is upstream's:
//     "<h(network)>-<h(ifname:containerID)>, net: <network>, if: <ifname>,
//     id: <containerID>", h being the first 16 hex digits of SHA-512, double
//     quotes removed from the names, cut to 128 bytes. Teardown and Check
//     match the hash; GC matches its first half, h(network). Comments in the
//     form of our earlier releases (32 hex digits of
//     SHA-256(network:ifname:containerID), then the same text) are still
//     found by Teardown, Check and GC, and Setup replaces them. Teardown
//     removes the rules only: the table and chains are shared.
//
// # Cost
//
// The nftables backend runs no process: every call is one netlink socket,
// a read, and at most one batch, which the kernel applies entirely or not at
// all. The iptables backend applies each family's change with one
// iptables-restore (one transaction of the nat table), never a string of
// single-rule iptables calls; see iptablesMasq for the counts.
package netfilter

import (
	"errors"
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/cniforge/plugins/pkg/owner"
)

// Backend names, as accepted by NewMasq and in the ipMasqBackend config key.
const (
	BackendIPTables = "iptables"
	BackendNFTables = "nftables"
)

// ErrUnknownBackend is returned by NewMasq for a backend name it does not know.
var ErrUnknownBackend = errors.New("unknown masquerade backend")

// ErrUnavailable is returned (wrapped) when the requested backend cannot be
// used in this namespace: binary missing, nat table not loadable, no
// nf_tables support.
var ErrUnavailable = errors.New("netfilter backend unavailable")

// ErrMissing is returned (wrapped) by Check when a rule or chain is absent or
// differs from what Setup installs; the message names what is missing.
var ErrMissing = errors.New("rule missing")

// Owner identifies one attachment's rules: network, container ID and
// interface name (see pkg/owner, where it is defined so that code that
// keeps no rules can name an owner without linking this package).
type Owner = owner.Owner

// Owners turns the attachments a GC call lists as still in use into the
// owners of network to keep.
func Owners(network string, attachments []types.GCAttachment) []Owner {
	return owner.Owners(network, attachments)
}

// Masq installs masquerade (source NAT to the outgoing interface's address)
// for traffic leaving a container's addresses for destinations outside the
// container's subnet, excluding multicast.
//
// All methods act on the calling thread's network namespace.
type Masq interface {
	// Backend returns BackendIPTables or BackendNFTables.
	Backend() string

	// Setup installs the rules of o for addrs (the container's addresses,
	// IP and prefix length, as IPAM returned them). It is idempotent: rules
	// already present are not duplicated; rules of o that differ are
	// replaced. With no addresses it does nothing. Rules are applied as one
	// transaction per address family: on error nothing of that family is
	// left half-made.
	Setup(o Owner, addrs []*net.IPNet) error

	// Teardown removes every rule of o. Rules already absent are success. It
	// needs neither the addresses nor the container namespace.
	Teardown(o Owner) error

	// Check verifies, read-only, that the rules Setup would install for
	// (o, addrs) are present. The error wraps ErrMissing and names what is
	// missing.
	Check(o Owner, addrs []*net.IPNet) error

	// GC removes the rules of network whose owner is not in keep. Owners in
	// keep whose Network differs are ignored. It keeps going on errors and
	// returns them joined. When the backend cannot be used here at all, the
	// error wraps ErrUnavailable (a caller sweeping both backends may ignore
	// that one).
	GC(network string, keep []Owner) error
}

// Prestarter is a Masq that can start the process its Setup will run
// before the addresses are known (the iptables backend on iptables-nft:
// the restore). Prestart acts in the calling thread's namespace and
// never fails: without a prestarted process, Setup starts its own.
// Release ends a prestarted process Setup did not take; it changes
// nothing in the kernel.
type Prestarter interface {
	Prestart()
	Release()
}

// NewMasq returns the masquerade backend named by backend: BackendIPTables,
// BackendNFTables, or "" for the default, which is iptables unless iptables
// is unusable here and nftables works (as upstream). Any other name yields an
// error wrapping ErrUnknownBackend that names the ipMasqBackend key.
//
// It probes the calling thread's namespace only for "".
func NewMasq(backend string) (Masq, error) {
	switch backend {
	case BackendIPTables:
		return newIPTablesMasq(), nil
	case BackendNFTables:
		return newNFTablesMasq(), nil
	case "":
		return defaultMasq()
	default:
		return nil, fmt.Errorf("ipMasqBackend: %q: %w (want %q or %q)",
			backend, ErrUnknownBackend, BackendIPTables, BackendNFTables)
	}
}

// TeardownMasqAll removes the rules of o from both backends, whichever hold
// any, for DEL: the backend used at ADD may not be known (config changed,
// other suite), and the container namespace is not needed. Absent rules and
// an unusable backend are success; other errors of both backends are joined.
func TeardownMasqAll(o Owner) error {
	return teardownMasqAll(o, newIPTablesMasq(), newNFTablesMasq())
}

func teardownMasqAll(o Owner, ipt *iptablesMasq, nft *nftablesMasq) error {
	// nftables first: usually it has nothing of o's and commits nothing,
	// so its socket closes before the iptables teardown's commit leaves
	// cleanup work for every later close to wait for (see nfconn.go).
	nftErr := nft.teardownIfUsable(o)
	return errors.Join(ipt.teardownIfUsable(o), nftErr)
}

// GCMasqAll removes the rules of network whose owner is not in keep from
// both backends, for GC: rules may have been made by either (config changed,
// other suite). A backend that cannot be used here holds no rules and is
// skipped; the other errors of both backends are joined. Like GC, it keeps
// going on errors. It acts on the calling thread's network namespace.
func GCMasqAll(network string, keep []Owner) error {
	return gcMasqAll(network, keep, newIPTablesMasq(), newNFTablesMasq())
}

func gcMasqAll(network string, keep []Owner, ipt *iptablesMasq, nft *nftablesMasq) error {
	return errors.Join(ipt.gcIfUsable(network, keep), nft.gcIfUsable(network, keep))
}
