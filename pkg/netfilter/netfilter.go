// Package netfilter is what every rule set of the suite shares: the Owner
// of an attachment's rules and its tags and hashes as both suites write
// them (owner.go), the backend names, the errors callers compare with
// (ErrMissing, ErrUnavailable, ErrUnknownBackend), and the Masq and
// Prestarter interfaces. It imports no netlink and no nftables code, so
// that naming an owner or a backend links none.
//
// The rule sets and their machinery live below it, one concern per
// package:
//
//	masq/       masquerade (bridge, ptp): iptables and nftables backends
//	hostport/   port forwards (portmap): iptables and nftables backends
//	forward/    forward/allow rules and isolation (firewall): both backends
//	macspoof/   the bridge's MAC spoof filter (nftables bridge family)
//	iptables/   iptables-restore batches and iptables-save parsing, run
//	            with the chain locks and the xtables lock; the Runner the
//	            rule sets' iptables backends share
//	iptnft/     iptables-nft rules read and written over netlink, as
//	            iptables-nft encodes them, instead of a process
//	nftnl/      nftables over netlink: the process's shared connection per
//	            namespace, generation-consistent reads, the rule sieve,
//	            object probes and hand-made batches
//
// A rule set imports the machinery packages; none imports another rule
// set, and the machinery imports no rule set.
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
package netfilter

import (
	"errors"
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

	// SetupUndoable is Setup that also returns undo, which takes o's rules
	// back to what they were before this call: an ADD's undo after a later
	// step failed. Over a live attachment (a runtime's second ADD) undo
	// removes only what this call added, never the rules that were there.
	SetupUndoable(o Owner, addrs []*net.IPNet) (undo func() error, err error)

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
