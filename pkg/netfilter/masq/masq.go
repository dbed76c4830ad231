package masq

import (
	"errors"
	"fmt"
	"net"

	"github.com/cniforge/plugins/pkg/netfilter"
)

// NewMasq returns the masquerade backend named by backend: BackendIPTables,
// BackendNFTables, or "" for the default, which is iptables unless iptables
// is unusable here and nftables works (as upstream). Any other name yields an
// error wrapping ErrUnknownBackend that names the ipMasqBackend key.
//
// Traffic to a destination in exclude (ipMasqExcludeCIDRs, a key beyond
// upstream's: the cluster's pod CIDR, say, so that pods on other nodes see
// a pod's own address) is not masqueraded, like traffic to the
// container's own subnet. Setup installs and Check asks for the
// exclusions; Teardown and GC find them by their owner as every other
// rule, so they need not be told.
//
// It probes the calling thread's namespace only for "".
func NewMasq(backend string, exclude ...*net.IPNet) (netfilter.Masq, error) {
	switch backend {
	case netfilter.BackendIPTables:
		m := newIPTablesMasq()
		m.exclude = exclude
		return m, nil
	case netfilter.BackendNFTables:
		return &nftablesMasq{exclude: exclude}, nil
	case "":
		return defaultMasq(exclude)
	default:
		return nil, fmt.Errorf("ipMasqBackend: %q: %w (want %q or %q)",
			backend, netfilter.ErrUnknownBackend, netfilter.BackendIPTables, netfilter.BackendNFTables)
	}
}

// TeardownMasqAll removes the rules of o from both backends, whichever hold
// any, for DEL: the backend used at ADD may not be known (config changed,
// other suite), and the container namespace is not needed. Absent rules and
// an unusable backend are success; other errors of both backends are joined.
func TeardownMasqAll(o netfilter.Owner) error {
	return teardownMasqAll(o, newIPTablesMasq(), newNFTablesMasq())
}

func teardownMasqAll(o netfilter.Owner, ipt *iptablesMasq, nft *nftablesMasq) error {
	// nftables first: usually it has nothing of o's and commits nothing,
	// so its socket closes before the iptables teardown's commit leaves
	// cleanup work for every later close to wait for (see nftnl/conn.go).
	nftErr := nft.teardownIfUsable(o)
	return errors.Join(ipt.teardownIfUsable(o), nftErr)
}

// GCMasqAll removes the rules of network whose owner is not in keep from
// both backends, for GC: rules may have been made by either (config changed,
// other suite). A backend that cannot be used here holds no rules and is
// skipped; the other errors of both backends are joined. Like GC, it keeps
// going on errors. It acts on the calling thread's network namespace.
func GCMasqAll(network string, keep []netfilter.Owner) error {
	return gcMasqAll(network, keep, newIPTablesMasq(), newNFTablesMasq())
}

func gcMasqAll(network string, keep []netfilter.Owner, ipt *iptablesMasq, nft *nftablesMasq) error {
	return errors.Join(ipt.gcIfUsable(network, keep), nft.gcIfUsable(network, keep))
}
