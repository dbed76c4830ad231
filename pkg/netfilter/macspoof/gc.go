package macspoof

import (
	"errors"
	"fmt"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/netfilter"
)

// GCMacSpoofChecks removes the checks of network whose owner is not in keep
// (owners of other networks in keep are ignored). Upstream's names carry no
// network, so a check in its layout counts as network's when its port is
// gone or is a port of bridge (network's bridge); a check whose port is
// gone guards nothing, whichever network made it. Checks in our earlier
// layout name their network. A kernel without nf_tables, or without the
// tables, holds none; other nftables errors are returned.
func GCMacSpoofChecks(network, bridge string, keep []netfilter.Owner) error {
	c, err := nftables.New() // not lasting: cannot fail
	if err != nil {
		return fmt.Errorf("collect mac spoof checks of network %q: %w", network, err)
	}
	err = gcMacspoof(c, network, bridge, keep)
	if errors.Is(err, netfilter.ErrUnavailable) {
		return nil // no nf_tables here, so no rules either
	}
	return err
}

func gcMacspoof(c *nftables.Conn, network, bridge string, keep []netfilter.Owner) error {
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
	chains, err := bridgeChains(c, macspoofTableName)
	if err != nil || chains[macspoofBaseChain] == nil {
		return err
	}
	rules, err := c.GetRules(macspoofTable, macspoofBase())
	if err != nil {
		return fmt.Errorf("list rules of bridge %s %s: %w", macspoofTableName, macspoofBaseChain, err)
	}
	dead := 0
	for _, r := range rules {
		com := ruleComment(r)
		ref := macspoofRefOf(com)
		if !isMacspoofComment(com) || keptRef[ref] {
			continue
		}
		var port string
		if chains["cni-br-iface-"+ref] != nil {
			rs, err := c.GetRules(macspoofTable, chainIn("cni-br-iface-"+ref))
			if err != nil {
				return fmt.Errorf("list rules of bridge %s %s: %w", macspoofTableName, "cni-br-iface-"+ref, err)
			}
			port = macspoofPort(rs)
		}
		if !portGoneOrOn(port, bridge) {
			continue
		}
		if err := c.DelRule(r); err != nil {
			return err
		}
		queueMacspoofChainsDelete(c, chains, ref)
		dead++
	}
	if dead == 0 {
		return nil
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("collect mac spoof checks of network %q in bridge %s: %w", network, macspoofTableName, err)
	}
	return nil
}

// portGoneOrOn reports whether the link named port is absent from the
// calling thread's namespace, or enslaved to bridge.
func portGoneOrOn(port, bridge string) bool {
	if port == "" {
		return true
	}
	l, err := netlink.LinkByName(port)
	if err != nil {
		var nf netlink.LinkNotFoundError
		return errors.As(err, &nf)
	}
	if bridge == "" {
		return false
	}
	br, err := netlink.LinkByName(bridge)
	return err == nil && l.Attrs().MasterIndex == br.Attrs().Index
}
