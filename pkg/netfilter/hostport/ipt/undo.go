package ipt

import (
	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// An ADD may land on a live attachment: check --repair, podman's network
// reload, a runtime's second ADD. Its undo (Setup's own on error, and the
// one SetupUndoable returns for a later step's failure) must then put back
// what was there, not remove the attachment's forwards: those carry a
// running pod's traffic. So each backend remembers what the attachment
// held before the change and the undo goes back to exactly that: on a
// fresh attachment (nothing before) it removes everything, as a teardown;
// on a live one it removes what this ADD added and adds back what it
// removed, leaving the rest (and its handles and counters) alone. The
// shared chains, tables and fixed rules stay, as after any teardown.

// On iptables the snapshot is iptables.ChainSnapshot: the CNI-DN chain's
// rules and its CNI-HOSTPORT-DNAT entries (hostport/nft/undo.go has nftables').

// restoreFamily takes o's forwards of f back to w; the caller holds the
// locks. Nothing before is a teardown (netlink's short way on
// iptables-nft).
func (p *iptablesPortMap) restoreFamily(o netfilter.Owner, f nftnl.Family, w iptables.ChainSnapshot) error {
	if !w.Exists {
		_, err := p.teardownFamily(o, f)
		return err
	}
	nat, err := p.m.Save(f)
	if err != nil {
		return err
	}
	return p.apply(f, map[string][]string{"nat": w.RestoreLines(nat)})
}
