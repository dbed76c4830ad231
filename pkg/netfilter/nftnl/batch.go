package nftnl

import (
	"encoding/binary"
	"errors"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// nftBatchMsg is a batch's begin or end message for nf_tables.
func NftBatchMsg(t int) netlink.Message {
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
func NftNewChainMsg(fam nftables.TableFamily, table, chain string) netlink.Message {
	ae := netlink.NewAttributeEncoder()
	ae.String(unix.NFTA_CHAIN_TABLE, table)
	ae.String(unix.NFTA_CHAIN_NAME, chain)
	attrs, _ := ae.Encode() // strings only: encoding cannot fail
	return nftChangeMsg(unix.NFT_MSG_NEWCHAIN, netlink.Create|netlink.Excl, byte(fam), attrs)
}

// nftNewRuleMsg appends a rule of exprs to chain; proto, when not 0, goes
// along as the rule's compat protocol for its xt matches and targets.
func NftNewRuleMsg(fam nftables.TableFamily, table, chain string, exprs []expr.Any, proto uint32) (netlink.Message, error) {
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
func SendNFTBatch(nl *netlink.Conn, msgs []netlink.Message) error {
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
