package forward

import (
	"net"
	"net/netip"

	"github.com/google/nftables"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/iptnft"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// teardownNFT is the firewall's iptables Teardown for one family of
// iptables-nft: o's rules in CNI-FORWARD (those carrying its marker
// comment) go by handle over netlink, in one batch, with no process.
// Upstream's rules carry no comment and are told by their exact spec: a
// rule without a comment for one of ips answers done=false, as does a
// refused batch, and Teardown reads with iptables-save.
func (m *iptablesForward) teardownNFT(o netfilter.Owner, f nftnl.Family, ips []net.IP) (done bool) {
	if m.ipt.NoNFT || !m.ipt.IsNFTVariant(f) {
		return false
	}
	d, err := iptnft.ReadNFTChain(f, "filter", "", fwdChain)
	if err != nil {
		return false
	}
	defer d.Close()
	own := netfilter.IptablesMarkerComment(o)
	var del []*nftables.Rule
	for _, r := range d.Own {
		ri := iptnft.ReadIPTRule(r)
		if ri.Comment == own {
			del = append(del, r)
			continue
		}
		for _, ip := range ips {
			if a, ok := netip.AddrFromSlice(ip); ok && ri.Comment == "" &&
				(ri.Src.Contains(a.Unmap()) || ri.Dst.Contains(a.Unmap())) {
				return false // maybe upstream's rule for this attachment
			}
		}
	}
	return len(del) == 0 || d.DeleteRules(del)
}
