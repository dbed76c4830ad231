package macspoof

import (
	"errors"
	"fmt"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// GCMacSpoofChecks removes the checks of network whose owner is not in keep
// (owners of other networks in keep are ignored). Upstream's names carry no
// network, and two networks may share a bridge (two bridge networks with
// no "bridge" key both use cni0): a check in its layout is collected only
// when its port is gone, so GC of one network never takes the check of
// another's live port. A check whose port is gone guards nothing,
// whichever network made it; one left on a live port only holds that port
// to its own MAC, until the port goes. Checks in our earlier layout name
// their network. A kernel without nf_tables, or without the tables, holds
// none; other nftables errors are returned.
func GCMacSpoofChecks(network string, keep []netfilter.Owner) error {
	c, err := nftables.New() // not lasting: cannot fail
	if err != nil {
		return fmt.Errorf("collect mac spoof checks of network %q: %w", network, err)
	}
	err = gcMacspoof(c, network, keep)
	if errors.Is(err, netfilter.ErrUnavailable) {
		return nil // no nf_tables here, so no rules either
	}
	return err
}

func gcMacspoof(c *nftables.Conn, network string, keep []netfilter.Owner) error {
	var kept []netfilter.Owner
	keptRef := map[string]bool{}
	for _, o := range keep {
		if o.Network == network {
			kept = append(kept, o)
			keptRef[macspoofRef(o)] = true
		}
	}
	if err := gcLegacyMacspoof(c, network, kept); err != nil {
		return err
	}
	return gcBaseRules(c, macspoofTable, macspoofBase(), network, func(r *nftables.Rule, chains map[string]*nftables.Chain) (func(), error) {
		com := ruleComment(r)
		ref := macspoofRefOf(com)
		if !isMacspoofComment(com) || keptRef[ref] {
			return nil, nil
		}
		var port string
		if chains["cni-br-iface-"+ref] != nil {
			rs, err := c.GetRules(macspoofTable, chainIn("cni-br-iface-"+ref))
			if err != nil {
				return nil, fmt.Errorf("list rules of bridge %s %s: %w", macspoofTableName, "cni-br-iface-"+ref, err)
			}
			port = macspoofPort(rs)
		}
		if !portGone(port) {
			return nil, nil
		}
		return func() { queueMacspoofChainsDelete(c, chains, ref) }, nil
	})
}

// gcBaseRules removes, in one batch, the rules of table's base chain that
// dead picks, in either layout: dead returns, for a rule to remove, what
// queues the removal of the rule's own chains once the rule's is queued
// (the rule jumps to them). A table without its base chain holds none.
func gcBaseRules(c *nftables.Conn, table *nftables.Table, base *nftables.Chain, network string, dead func(r *nftables.Rule, chains map[string]*nftables.Chain) (func(), error)) error {
	chains, err := bridgeChains(c, table.Name)
	if err != nil || chains[base.Name] == nil {
		return err
	}
	rules, err := c.GetRules(table, base)
	if err != nil {
		return fmt.Errorf("list rules of bridge %s %s: %w", table.Name, base.Name, err)
	}
	n := 0
	for _, r := range rules {
		dropChains, err := dead(r, chains)
		if err != nil {
			return err
		}
		if dropChains == nil {
			continue
		}
		if err := c.DelRule(r); err != nil {
			return err
		}
		dropChains()
		n++
	}
	if err := nftnl.FlushQueued(c, n > 0); err != nil {
		return fmt.Errorf("collect mac spoof checks of network %q in bridge %s: %w", network, table.Name, err)
	}
	return nil
}

// portGone reports whether the link named port is absent from the calling
// thread's namespace ("" names none).
func portGone(port string) bool {
	if port == "" {
		return true
	}
	_, err := netlink.LinkByName(port)
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf)
}
