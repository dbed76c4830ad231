package netfilter

import (
	"encoding/binary"
	"errors"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
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
func (p *iptablesPortMap) setupNFT(f family, chain string, tables map[string][]string) bool {
	if p.m.noNFT || !p.m.isNFTVariant(f) || len(tables["raw"]) > 0 {
		return false
	}
	lines := tables["nat"]
	if len(lines) == 0 || lines[0] != ":"+chain+" - [0:0]" {
		return false
	}
	fam := f.nft()
	msgs := []netlink.Message{nftBatchMsg(unix.NFNL_MSG_BATCH_BEGIN), nftNewChainMsg(fam, "nat", chain)}
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
		m, err := nftNewRuleMsg(fam, "nat", into, exprs, specProto(spec))
		if err != nil {
			return false
		}
		msgs = append(msgs, m)
	}
	msgs = append(msgs, nftBatchMsg(unix.NFNL_MSG_BATCH_END))
	err := withNFT(func(c *nftConn) error { return sendNFTBatch(c.nl, msgs) })
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

// nftBatchMsg is a batch's begin or end message for nf_tables.
func nftBatchMsg(t int) netlink.Message {
	return netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(t), Flags: netlink.Request},
		// nfgenmsg: family unspec, version 0, resource ID NFNL_SUBSYS_NFTABLES.
		Data: []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, unix.NFNL_SUBSYS_NFTABLES},
	}
}

// nftChangeMsg is one acknowledged change of an nf_tables batch.
func nftChangeMsg(msgType int, flags netlink.HeaderFlags, fam byte, attrs []byte) netlink.Message {
	return netlink.Message{
		Header: netlink.Header{
			Type:  netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | msgType),
			Flags: netlink.Request | netlink.Acknowledge | flags,
		},
		Data: append([]byte{fam, unix.NFNETLINK_V0, 0, 0}, attrs...),
	}
}

// nftNewChainMsg declares a regular (base-less) chain, failing if it exists.
func nftNewChainMsg(fam nftables.TableFamily, table, chain string) netlink.Message {
	ae := netlink.NewAttributeEncoder()
	ae.String(unix.NFTA_CHAIN_TABLE, table)
	ae.String(unix.NFTA_CHAIN_NAME, chain)
	attrs, _ := ae.Encode() // strings only: encoding cannot fail
	return nftChangeMsg(unix.NFT_MSG_NEWCHAIN, netlink.Create|netlink.Excl, byte(fam), attrs)
}

// nftNewRuleMsg appends a rule of exprs to chain; proto, when not 0, goes
// along as the rule's compat protocol for its xt matches and targets.
func nftNewRuleMsg(fam nftables.TableFamily, table, chain string, exprs []expr.Any, proto uint32) (netlink.Message, error) {
	ae := netlink.NewAttributeEncoder()
	ae.ByteOrder = binary.BigEndian // nf_tables' integers
	ae.String(unix.NFTA_RULE_TABLE, table)
	ae.String(unix.NFTA_RULE_CHAIN, chain)
	var err error
	ae.Nested(unix.NFTA_RULE_EXPRESSIONS, func(ne *netlink.AttributeEncoder) error {
		for _, e := range exprs {
			b, merr := expr.Marshal(byte(fam), e)
			if merr != nil {
				err = merr
				return merr
			}
			ne.Bytes(unix.NLA_F_NESTED|unix.NFTA_LIST_ELEM, b)
		}
		return nil
	})
	if proto != 0 {
		ae.Nested(unix.NFTA_RULE_COMPAT, func(ce *netlink.AttributeEncoder) error {
			ce.Uint32(unix.NFTA_RULE_COMPAT_PROTO, proto)
			ce.Uint32(unix.NFTA_RULE_COMPAT_FLAGS, 0)
			return nil
		})
	}
	attrs, aerr := ae.Encode()
	if err = errors.Join(err, aerr); err != nil {
		return netlink.Message{}, err
	}
	return nftChangeMsg(unix.NFT_MSG_NEWRULE, netlink.Create|netlink.Append, byte(fam), attrs), nil
}

// sendNFTBatch sends msgs (begin, changes, end) and reads one answer per
// acknowledged change: nil when all were acknowledged, else the first
// error (the kernel then applied none of them).
func sendNFTBatch(nl *netlink.Conn, msgs []netlink.Message) error {
	want := 0
	for _, m := range msgs {
		if m.Header.Flags&netlink.Acknowledge != 0 {
			want++
		}
	}
	if _, err := nl.SendMessages(msgs); err != nil {
		return err
	}
	for want > 0 {
		replies, err := nl.Receive()
		if err != nil {
			return err
		}
		for _, r := range replies {
			if r.Header.Type == netlink.Error {
				want--
			}
		}
	}
	return nil
}
