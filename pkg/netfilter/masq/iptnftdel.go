package masq

import (
	"encoding/hex"
	"net/netip"
	"strings"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
	"github.com/cniforge/plugins/pkg/netfilter/iptnft"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// teardownNFT is Teardown's short way for iptables-nft: the rules that
// iptables-nft-restore made live in nf_tables ("ip nat", "ip6 nat"), where
// netlink reads them and deletes them by handle in one batch, without
// iptables-save and iptables-restore (two processes, about 25 ms).
//
// It acts only when the attachment's chain surely goes as a whole, which
// is the common DEL: every marker in the chain is o's interface and every
// POSTROUTING jump to it is from a marked host, or the chain has no marker
// at all (upstream's layout). That is exactly when planLines would answer
// deleteLines. Anything else (another interface of the container still in
// the chain, a rule it cannot read) answers done=false, and the caller
// reads with iptables-save as before. A batch the kernel refuses (the
// ruleset moved under it) also answers done=false.
func (m *iptablesMasq) teardownNFT(o netfilter.Owner, f nftnl.Family) (done bool) {
	if m.NoNFT || !m.IsNFTVariant(f) {
		return false
	}
	chain := netfilter.IptablesChain(o)
	d, err := iptnft.ReadNFTChain(f, "nat", "POSTROUTING", chain)
	if err != nil {
		return false
	}
	defer d.Close()
	ifHex := hex.EncodeToString([]byte(o.IfName))
	hosts := map[netip.Prefix]bool{}
	for _, r := range d.Own {
		ri := iptnft.ReadIPTRule(r)
		if !strings.Contains(ri.Comment, " if: ") {
			continue
		}
		mIf, ok := markerIfName(ri.Comment)
		if !ok || mIf != ifHex || !ri.Src.IsValid() {
			return false // another interface's marker, or unreadable
		}
		hosts[ri.Src] = true
	}
	for _, r := range d.From {
		if ri := iptnft.ReadIPTRule(r); ri.Jump == chain && len(hosts) > 0 && !hosts[ri.Src] {
			return false // a jump no marker of o accounts for
		}
	}
	return d.DeleteChain()
}

// markerCommentRE reads the interface (in hex) from a marker's comment
// as the kernel holds it, unquoted (iptablesMarkerRE reads it as
// iptables-save prints it).
var markerCommentRE = iptables.NewLazyRE(`^name: "[^"\\]*" id: "[^"\\]*" if: ((?:[0-9a-f]{2})*)$`)

func markerIfName(comment string) (string, bool) {
	sm := markerCommentRE.FindStringSubmatch(comment)
	if sm == nil {
		return "", false
	}
	return sm[1], true
}
