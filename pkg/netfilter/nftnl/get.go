package nftnl

import (
	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// getSetElem fetches the element of key from set of pmTable in family f.
// A missing table, set or element is there=false with no error.
// nftGetRequest is an nf_tables GET of one object (no NLM_F_DUMP) of f's
// tables: the kernel answers with that object alone, or ENOENT.
func NftGetRequest(msgType int, fam nftables.TableFamily, attrs []byte) netlink.Message {
	return netlink.Message{
		Header: netlink.Header{
			Type:  netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | msgType),
			Flags: netlink.Request,
		},
		// nfgenmsg: family, version NFNETLINK_V0, resource ID 0.
		Data: append([]byte{byte(fam), unix.NFNETLINK_V0, 0, 0}, attrs...),
	}
}
