package ipt

import (
	"strings"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// setupNFT is setupFamily's way for iptables-nft without a process, in
// the common ADD that sharedViewNFT read: the shared chains and jumps in
// place and the attachment's chain absent, so the restore input is only
// the chain's declaration and appends (to it and to CNI-HOSTPORT-DNAT).
// Then it writes those in one nf_tables batch, each rule encoded as
// iptables-nft encodes its spec (iptSpecExprs, the encoding Check looks
// for), so iptables-save prints them as iptables-restore's own and
// iptables -C and -D find them by their spec.
//
// The batch is written here rather than through google/nftables, which
// cannot send what the multiport match of the CNI-HOSTPORT-DNAT entries
// needs: the rule's protocol (NFTA_RULE_COMPAT), as iptables-nft sends it
// from "-p", without which the kernel refuses the match.
//
// Anything else answers false and the caller runs the restore: another
// line (a shared chain to make, the raw table's guard, a rule it cannot
// encode), legacy iptables, or a batch the kernel refuses, which changed
// nothing (nf_tables applies a batch whole).
func (p *iptablesPortMap) setupNFT(f nftnl.Family, chain string, tables map[string][]string) bool {
	if p.m.NoNFT || !p.m.IsNFTVariant(f) || len(tables["raw"]) > 0 {
		return false
	}
	lines := tables["nat"]
	if len(lines) == 0 || lines[0] != ":"+chain+" - [0:0]" {
		return false
	}
	fam := f.Nft()
	msgs := []netlink.Message{nftnl.NftBatchMsg(unix.NFNL_MSG_BATCH_BEGIN), nftnl.NftNewChainMsg(fam, "nat", chain)}
	for _, l := range lines[1:] {
		rest, ok := strings.CutPrefix(l, "-A ")
		if !ok {
			return false
		}
		into, spec, _ := strings.Cut(rest, " ")
		if into != chain && into != pmDNATChain {
			return false
		}
		exprs, ok := iptSpecExprs(f, spec)
		if !ok {
			return false
		}
		m, err := nftnl.NftNewRuleMsg(fam, "nat", into, exprs, specProto(spec))
		if err != nil {
			return false
		}
		msgs = append(msgs, m)
	}
	msgs = append(msgs, nftnl.NftBatchMsg(unix.NFNL_MSG_BATCH_END))
	err := nftnl.WithNFT(func(c *nftnl.NftConn) error { return nftnl.SendNFTBatch(c.Nl, msgs) })
	return err == nil
}

// specProto is the protocol number of a spec's "-p", 0 without one.
func specProto(spec string) uint32 {
	switch {
	case strings.HasPrefix(spec, "-p tcp ") || strings.Contains(spec, " -p tcp "):
		return unix.IPPROTO_TCP
	case strings.HasPrefix(spec, "-p udp ") || strings.Contains(spec, " -p udp "):
		return unix.IPPROTO_UDP
	}
	return 0
}
