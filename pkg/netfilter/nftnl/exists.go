package nftnl

import (
	"errors"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// nftChainExists asks nf_tables for one chain of f's table (a GETCHAIN
// without NLM_F_DUMP). That costs the same however many chains the node
// holds, where a listing grows with every pod's masquerade, port-forward
// and firewall chains. No such chain or table (ENOENT) is false.
func NftChainExists(f Family, table, chain string) (bool, error) {
	nl, done, err := RequestConn()
	if err != nil {
		return false, err
	}
	defer done()
	return NftChainExistsIn(nl, f.Nft(), table, chain)
}

// nftTableExistsIn asks nf_tables on nl for one table of family fam (a
// GETTABLE without NLM_F_DUMP); ENOENT is false.
func NftTableExistsIn(nl *netlink.Conn, fam nftables.TableFamily, table string) (bool, error) {
	return nftObjectExists(nl, unix.NFT_MSG_GETTABLE, fam, func(ae *netlink.AttributeEncoder) {
		ae.String(unix.NFTA_TABLE_NAME, table)
	})
}

// nftChainExistsIn is nftChainExists for a table of any nf_tables family,
// asked on nl.
func NftChainExistsIn(nl *netlink.Conn, fam nftables.TableFamily, table, chain string) (bool, error) {
	return nftObjectExists(nl, unix.NFT_MSG_GETCHAIN, fam, func(ae *netlink.AttributeEncoder) {
		ae.String(unix.NFTA_CHAIN_TABLE, table)
		ae.String(unix.NFTA_CHAIN_NAME, chain)
	})
}

// nftObjectExists sends one GET of msgType (no NLM_F_DUMP) with the
// attributes name writes, and reports whether the object is there: ENOENT
// is false.
func nftObjectExists(nl *netlink.Conn, msgType int, fam nftables.TableFamily, name func(*netlink.AttributeEncoder)) (bool, error) {
	ae := netlink.NewAttributeEncoder()
	name(ae)
	attrs, err := ae.Encode()
	if err != nil {
		return false, err
	}
	_, err = nl.Execute(NftGetRequest(msgType, fam, attrs))
	switch {
	case errors.Is(err, unix.ENOENT):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}
