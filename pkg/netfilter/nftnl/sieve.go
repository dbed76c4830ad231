package nftnl

import (
	"bytes"
	"slices"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"github.com/mdlayher/netlink/nltest"
	"golang.org/x/sys/unix"
)

// rulesWith is c.GetRules(table, chain) for a caller that looks only at
// the rules holding one of needles, byte for byte, in their netlink
// encoding: the others are left out, in the order the kernel lists them.
//
// The chains every pod shares (POSTROUTING, CNI-HOSTPORT-DNAT,
// CNI-FORWARD) hold a rule or two per pod; google/nftables decodes every
// expression of every rule it reads, through reflection, and on a node
// with a hundred pods that was a fifth of each CHECK's CPU. Here the dump
// is read raw, sieved with bytes.Contains, and only what is left is
// decoded, by google/nftables itself (it is handed the kept messages as
// if the kernel had sent only those), so a kept rule reads exactly as
// GetRules reads it.
//
// A needle must be bytes that any rule the caller would accept holds
// verbatim: a verdict's chain name, an xt comment, a compare's data. Each
// is decoded from the very bytes it is found in, so a rule that lacks
// them cannot decode to a match; a rule kept by chance (the bytes occur
// elsewhere in it) is only decoded for nothing.
func RulesWith(c *NftConn, table *nftables.Table, chain string, needles ...[]byte) ([]*nftables.Rule, error) {
	return RulesWhere(c, table, chain, func(_ int, data []byte) bool {
		return slices.ContainsFunc(needles, func(n []byte) bool { return len(n) > 0 && bytes.Contains(data, n) })
	})
}

// rulesWhere is rulesWith for a caller that picks the rules itself: keep
// sees each rule's place in the chain (from 0) and its message's bytes.
func RulesWhere(c *NftConn, table *nftables.Table, chain string, keep func(i int, data []byte) bool) ([]*nftables.Rule, error) {
	ae := netlink.NewAttributeEncoder()
	ae.String(unix.NFTA_RULE_TABLE, table.Name)
	ae.String(unix.NFTA_RULE_CHAIN, chain)
	attrs, err := ae.Encode()
	if err != nil {
		return nil, err
	}
	req := NftGetRequest(unix.NFT_MSG_GETRULE, table.Family, attrs)
	req.Header.Flags |= netlink.Dump
	msgs, err := c.Nl.Execute(req)
	if err != nil {
		return nil, err
	}
	kept := msgs[:0]
	for i, m := range msgs {
		if keep(i, m.Data) {
			kept = append(kept, m)
		}
	}
	if len(kept) == 0 {
		return nil, nil
	}
	return decodeRules(table, chain, kept)
}

// decodeRules decodes rule messages of a GETRULE dump through
// google/nftables' GetRules, over a connection whose "kernel" answers with
// them.
func decodeRules(table *nftables.Table, chain string, msgs []netlink.Message) ([]*nftables.Rule, error) {
	reply := make([]netlink.Message, 0, len(msgs)+1)
	for _, m := range msgs {
		m.Header.Flags |= netlink.Multi
		reply = append(reply, m)
	}
	reply = append(reply, netlink.Message{Header: netlink.Header{Type: netlink.Done, Flags: netlink.Multi}, Data: make([]byte, 4)})
	dec, err := nftables.New(nftables.WithTestDial(func(req []netlink.Message) ([]netlink.Message, error) {
		if len(req) == 0 {
			return nil, nil
		}
		out := slices.Clone(reply)
		for i := range out {
			out[i].Header.Sequence, out[i].Header.PID = req[0].Header.Sequence, nltest.PID
		}
		return out, nil
	}))
	if err != nil {
		return nil, err
	}
	return dec.GetRules(table, &nftables.Chain{Name: chain})
}
