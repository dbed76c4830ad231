// Package backends picks and runs the port-forwarding backends of
// package hostport: NewPortMap chooses iptables (hostport/ipt) or nftables
// (hostport/nft) as upstream does, and DEL and GC go through both, since
// the one used at ADD may not be known.
package backends

import (
	"errors"
	"fmt"
	"net"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/hostport"
	"github.com/cniforge/plugins/pkg/netfilter/hostport/ipt"
	"github.com/cniforge/plugins/pkg/netfilter/hostport/nft"
)

// NewPortMap returns the port-forwarding backend named backend:
// BackendIPTables, BackendNFTables, or "" for upstream's default (iptables
// unless it is unusable here and nftables works).
func NewPortMap(backend string) (hostport.PortMap, error) {
	switch backend {
	case netfilter.BackendIPTables:
		return ipt.New(), nil
	case netfilter.BackendNFTables:
		return nft.New(), nil
	case "":
		iptPM := ipt.New()
		if err := iptPM.Usable(); err != nil {
			nftPM := nft.New()
			if nftErr := nftPM.Usable(); nftErr == nil {
				return nftPM, nil
			}
		}
		return iptPM, nil
	default:
		return nil, fmt.Errorf("backend: %q: %w (want %q or %q)", backend, netfilter.ErrUnknownBackend, netfilter.BackendIPTables, netfilter.BackendNFTables)
	}
}

// TeardownPortMapAll removes o's forwards from both backends (the one used
// at ADD may not be known) and returns the container addresses they
// pointed to. An unusable backend holds nothing.
func TeardownPortMapAll(o netfilter.Owner) ([]net.IP, error) { return TeardownPortMapAllOf(o, nil) }

// TeardownPortMapAllOf is TeardownPortMapAll for a DEL that knows o's
// mappings (the runtime passes ADD's again): with a few, nftables looks
// their elements up by key instead of reading whole maps, whose size is
// every container's. An nftables element of o under a key not in mappings
// (a runtime that changed them between ADD and DEL) then stays until GC;
// with mappings nil, or many, every element of o is found by reading.
// iptables removes o's whole chain either way.
func TeardownPortMapAllOf(o netfilter.Owner, mappings []hostport.PortMapping) ([]net.IP, error) {
	var ips []net.IP
	var errs []error
	for _, pm := range []hostport.PortMap{ipt.New(), nft.New()} {
		if pm.Usable() != nil {
			continue
		}
		var got []net.IP
		var err error
		if byKey, ok := pm.(interface {
			TeardownOf(netfilter.Owner, []hostport.PortMapping) ([]net.IP, error)
		}); ok {
			got, err = byKey.TeardownOf(o, mappings)
		} else {
			got, err = pm.Teardown(o)
		}
		ips = append(ips, got...)
		errs = append(errs, err)
	}
	return ips, errors.Join(errs...)
}

// GCPortMapAll removes the forwards of network whose owner is not in keep,
// from both backends; an unusable backend holds nothing.
func GCPortMapAll(network string, keep []netfilter.Owner) error {
	var errs []error
	for _, pm := range []hostport.PortMap{ipt.New(), nft.New()} {
		if pm.Usable() != nil {
			continue
		}
		errs = append(errs, pm.GC(network, keep))
	}
	return errors.Join(errs...)
}
