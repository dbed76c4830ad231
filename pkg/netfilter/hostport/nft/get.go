package nft

import (
	"errors"
	"fmt"
	"net"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/userdata"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/hostport"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// Teardown by lookup: DEL knows its mappings (the runtime passes them
// again), so the keys of its elements are known, and each can be fetched
// by key (a GETSETELEM without NLM_F_DUMP) instead of dumping whole maps
// that may hold every other container's mappings. The cost then follows
// this attachment's mappings, not the node's. Ownership is still decided
// by the element's comment, so another owner's element under the same key
// is left alone.

// pmLookupMax is the most mappings torn down by lookups: each costs up to
// two round trips (both families), so past it one dump is cheaper.
const pmLookupMax = 32

// teardownByKey removes o's elements among those keyed by mappings, and
// the hairpin and masq_all elements of the container addresses they point
// to. It returns ok=false, having changed nothing, when lookups do not fit
// (too many mappings, or a kernel without single-element GET); the caller
// then dumps.
func (p *nftablesPortMap) teardownByKey(c *nftables.Conn, o netfilter.Owner, mappings []hostport.PortMapping) (ips []net.IP, changed, ok bool, err error) {
	if len(mappings) == 0 || len(mappings) > pmLookupMax {
		return nil, false, false, nil
	}
	nl, done, err := nftnl.RequestConn()
	if err != nil {
		return nil, false, false, nil
	}
	defer done()
	hash := nftPMHash(o)
	type del struct {
		set *nftables.Set
		els []nftables.SetElement
	}
	var dels []del
	for _, f := range nftnl.Families {
		sets := map[string]*nftables.Set{}
		for _, s := range pmSets(f) {
			sets[s.Name] = s
		}
		var cips []net.IP
		found := map[string][]nftables.SetElement{}
		look := func(set string, key []byte) error {
			e, there, err := getSetElem(nl, f, set, key)
			if err != nil || !there {
				return err
			}
			if h, _, mine := parseNFTPMComment(e.Comment); mine && h == hash {
				found[set] = append(found[set], e)
			}
			return nil
		}
		seen := map[string]bool{}
		for _, m := range mappings {
			if m.HostIP != nil && nftnl.FamilyOf(m.HostIP) != f {
				continue
			}
			key := append([]byte{protoNum(m.Protocol), 0, 0, 0}, port4(m.HostPort)...)
			set := pmPortsMap
			if h := m.HostAddr(); h != nil {
				key, set = append(slices.Clone(addrBytes(f, h)), key...), pmHostIPMap
			}
			if seen[set+string(key)] {
				continue
			}
			seen[set+string(key)] = true
			if err := look(set, key); err != nil {
				if errors.Is(err, errNoElemGet) {
					return nil, false, false, nil
				}
				return nil, false, true, err
			}
		}
		for _, set := range []string{pmPortsMap, pmHostIPMap} {
			for _, e := range found[set] {
				ip := net.IP(slices.Clone(e.Val[:nftnl.AddrField[f].Len]))
				if !slices.ContainsFunc(cips, ip.Equal) {
					cips = append(cips, ip)
				}
			}
		}
		for _, cip := range cips {
			a := addrBytes(f, cip)
			if err := look(pmHairpin, append(slices.Clone(a), a...)); err != nil {
				return nil, false, true, err
			}
			if err := look(pmMasqAll, slices.Clone(a)); err != nil {
				return nil, false, true, err
			}
			// A GET of an interval set answers the element whose
			// ranges hold the key: the container's subnet . container.
			if err := look(pmHairpinNets, append(slices.Clone(a), a...)); err != nil {
				return nil, false, true, err
			}
		}
		ips = append(ips, cips...)
		for _, name := range []string{pmPortsMap, pmHostIPMap, pmHairpin, pmMasqAll, pmHairpinNets} {
			if len(found[name]) > 0 {
				dels = append(dels, del{sets[name], found[name]})
			}
		}
	}
	// At most pmLookupMax mappings' elements: one batch holds them.
	for _, d := range dels {
		if err := c.SetDeleteElements(d.set, d.els); err != nil {
			return ips, false, true, fmt.Errorf("set %s: %w", d.set.Name, err)
		}
	}
	return ips, len(dels) > 0, true, nil
}

// errNoElemGet says the kernel refused a single-element GET as such
// (before Linux 4.15 it only dumped).
var errNoElemGet = errors.New("single set element GET unsupported")

func getSetElem(nl *netlink.Conn, f nftnl.Family, set string, key []byte) (e nftables.SetElement, there bool, err error) {
	ae := netlink.NewAttributeEncoder()
	ae.String(unix.NFTA_SET_ELEM_LIST_TABLE, pmTable)
	ae.String(unix.NFTA_SET_ELEM_LIST_SET, set)
	ae.Nested(unix.NFTA_SET_ELEM_LIST_ELEMENTS, func(ae *netlink.AttributeEncoder) error {
		ae.Nested(unix.NFTA_LIST_ELEM, func(ae *netlink.AttributeEncoder) error {
			ae.Nested(unix.NFTA_SET_ELEM_KEY, func(ae *netlink.AttributeEncoder) error {
				ae.Bytes(unix.NFTA_DATA_VALUE, key)
				return nil
			})
			return nil
		})
		return nil
	})
	attrs, err := ae.Encode()
	if err != nil {
		return e, false, err
	}
	msgs, err := nl.Execute(nftnl.NftGetRequest(unix.NFT_MSG_GETSETELEM, f.Nft(), attrs))
	switch {
	case errors.Is(err, unix.ENOENT):
		return e, false, nil
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EINVAL):
		return e, false, errNoElemGet
	case err != nil:
		return e, false, fmt.Errorf("get element %x of %s %s %s: %w", key, f, pmTable, set, nftnl.NftUnsupported(err))
	}
	for _, m := range msgs {
		if len(m.Data) < 4 {
			continue
		}
		if e, there, err = decodeElemList(m.Data[4:]); err != nil || there {
			return e, there, err
		}
	}
	return e, false, nil
}

// decodeElemList decodes the first element of a NEWSETELEM message's
// attributes: its key, data and comment.
func decodeElemList(b []byte) (e nftables.SetElement, there bool, err error) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return e, false, err
	}
	for ad.Next() {
		if ad.Type() != unix.NFTA_SET_ELEM_LIST_ELEMENTS {
			continue
		}
		ad.Nested(func(list *netlink.AttributeDecoder) error {
			for list.Next() && !there {
				if list.Type() != unix.NFTA_LIST_ELEM {
					continue
				}
				there = true
				list.Nested(func(el *netlink.AttributeDecoder) error {
					for el.Next() {
						switch el.Type() {
						case unix.NFTA_SET_ELEM_KEY:
							el.Nested(func(d *netlink.AttributeDecoder) error { e.Key = dataValue(d); return nil })
						case nftaSetElemKeyEnd:
							el.Nested(func(d *netlink.AttributeDecoder) error { e.KeyEnd = dataValue(d); return nil })
						case unix.NFTA_SET_ELEM_DATA:
							el.Nested(func(d *netlink.AttributeDecoder) error { e.Val = dataValue(d); return nil })
						case unix.NFTA_SET_ELEM_USERDATA:
							e.Comment, _ = userdata.GetString(el.Bytes(), userdata.NFTNL_UDATA_SET_ELEM_COMMENT)
						}
					}
					return nil
				})
			}
			return nil
		})
	}
	return e, there, ad.Err()
}

// nftaSetElemKeyEnd is NFTA_SET_ELEM_KEY_END, the end of an interval
// element's range (x/sys/unix lacks it).
const nftaSetElemKeyEnd = 10

// dataValue returns the NFTA_DATA_VALUE of a nested nft_data.
func dataValue(d *netlink.AttributeDecoder) []byte {
	for d.Next() {
		if d.Type() == unix.NFTA_DATA_VALUE {
			return d.Bytes()
		}
	}
	return nil
}
