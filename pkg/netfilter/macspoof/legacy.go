package macspoof

import (
	"fmt"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/userdata"

	"github.com/cniforge/plugins/pkg/netfilter"
)

// Our earlier releases kept the mac spoof check in a table of their own:
//
//	table bridge cni_plugins_macspoof
//	  chain prerouting  (filter hook prerouting priority -300)
//	    iifname "<port>" jump <attachment chain>   comment nftLegacyComment(owner)
//	  chain cni-br-iface-<nftLegacyHash(owner)>
//	    ether saddr <mac> return
//	    drop
//
// Setup no longer writes it; Teardown, Check and GC still find it, so checks
// made before the switch to upstream's names are not stranded.
const (
	LegacyMacspoofTableName = "cni_plugins_macspoof"
	legacyMacspoofBaseChain = "prerouting"
)

var legacyMacspoofTable = &nftables.Table{Family: nftables.TableFamilyBridge, Name: LegacyMacspoofTableName}

func legacyMacspoofBase() *nftables.Chain {
	return &nftables.Chain{Name: legacyMacspoofBaseChain, Table: legacyMacspoofTable}
}

func LegacyMacspoofChainName(o netfilter.Owner) string {
	return "cni-br-iface-" + netfilter.NftLegacyHash(o)
}

// legacyMacspoofOwner reads the comment of a legacy jump rule.
func legacyMacspoofOwner(r *nftables.Rule) (netfilter.NftOwnerComment, bool) {
	c, ok := userdata.GetString(r.UserData, userdata.TypeComment)
	if !ok {
		return netfilter.NftOwnerComment{}, false
	}
	oc, ok := netfilter.ParseNFTComment(c)
	return oc, ok && oc.Legacy
}

// queueLegacyMacspoofTeardown queues in c the removal of o's legacy check.
func queueLegacyMacspoofTeardown(c *nftables.Conn, chains map[string]*nftables.Chain, o netfilter.Owner) error {
	if chains[legacyMacspoofBaseChain] != nil {
		rules, err := c.GetRules(legacyMacspoofTable, legacyMacspoofBase())
		if err != nil {
			return fmt.Errorf("list rules of bridge %s %s: %w", LegacyMacspoofTableName, legacyMacspoofBaseChain, err)
		}
		for _, r := range rules {
			if oc, ok := legacyMacspoofOwner(r); ok && oc.Owns(o) {
				if err := c.DelRule(r); err != nil {
					return err
				}
			}
		}
	}
	if name := LegacyMacspoofChainName(o); chains[name] != nil {
		ch := &nftables.Chain{Name: name, Table: legacyMacspoofTable}
		c.FlushChain(ch)
		c.DelChain(ch)
	}
	return nil
}

// checkLegacy is Check for a check our earlier releases made.
func (m MacSpoofCheck) checkLegacy(c *nftables.Conn) error {
	chains, err := bridgeChains(c, LegacyMacspoofTableName)
	if err != nil {
		return err
	}
	name := LegacyMacspoofChainName(m.Owner)
	where := "table bridge " + LegacyMacspoofTableName
	if chains[legacyMacspoofBaseChain] == nil || chains[name] == nil {
		return fmt.Errorf("%w: %s chain %s", netfilter.ErrMissing, where, name)
	}
	base, err := c.GetRules(legacyMacspoofTable, legacyMacspoofBase())
	if err != nil {
		return fmt.Errorf("list rules of bridge %s %s: %w", LegacyMacspoofTableName, legacyMacspoofBaseChain, err)
	}
	own, err := c.GetRules(legacyMacspoofTable, &nftables.Chain{Name: name, Table: legacyMacspoofTable})
	if err != nil {
		return fmt.Errorf("list rules of bridge %s %s: %w", LegacyMacspoofTableName, name, err)
	}
	if !slices.ContainsFunc(base, func(r *nftables.Rule) bool {
		oc, ok := legacyMacspoofOwner(r)
		return ok && oc.Owns(m.Owner) && isMacspoofJump(r, m.Port, name)
	}) || !slices.ContainsFunc(own, func(r *nftables.Rule) bool { return isMacReturn(r, m.MAC) }) ||
		len(own) == 0 || !isDrop(own[len(own)-1]) {
		return fmt.Errorf("%w: %s chain %s", netfilter.ErrMissing, where, name)
	}
	return nil
}

// gcLegacyMacspoof removes the legacy checks of network whose owner is not
// in kept (all of network).
func gcLegacyMacspoof(c *nftables.Conn, network string, kept []netfilter.Owner) error {
	return gcBaseRules(c, legacyMacspoofTable, legacyMacspoofBase(), network, func(r *nftables.Rule, chains map[string]*nftables.Chain) (func(), error) {
		oc, ok := legacyMacspoofOwner(r)
		if !ok || !oc.InNetwork(network) || slices.ContainsFunc(kept, oc.Owns) {
			return nil, nil
		}
		return func() {
			if name := "cni-br-iface-" + oc.Hash; chains[name] != nil {
				ch := &nftables.Chain{Name: name, Table: legacyMacspoofTable}
				c.FlushChain(ch)
				c.DelChain(ch)
			}
		}, nil
	})
}
