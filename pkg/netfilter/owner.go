package netfilter

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"strings"
)

// iptablesChain is the nat chain of one attachment: "CNI-" and the first 24
// hex digits of SHA-512(network + containerID), as upstream names it, so a
// DEL from either suite finds the other's chain. The interface name is not
// part of it (upstream's layout has no room for it).
func IptablesChain(o Owner) string {
	sum := sha512.Sum512([]byte(o.Network + o.ContainerID))
	return "CNI-" + hex.EncodeToString(sum[:])[:24]
}

// iptablesComment is the comment on every rule of an attachment, upstream's
// format. Network names and container IDs cannot hold '"' or '\' (CNI
// restricts both to [a-zA-Z0-9_.-]), so %q adds nothing but the quotes.
func IptablesComment(o Owner) string {
	return fmt.Sprintf("name: %q id: %q", o.Network, o.ContainerID)
}

// iptablesMarkerComment is the comment of an attachment's marker rules
// (see iptablesRules): upstream's comment, then the interface name in hex.
// Interface names may hold '"', '\\' and '\” (skel and the kernel allow
// them), which iptables-save escapes in ways that do not round-trip through
// our quoting; hex digits come back from iptables-save exactly as written.
func IptablesMarkerComment(o Owner) string {
	return fmt.Sprintf("%s if: %x", IptablesComment(o), o.IfName)
}

// iptablesCommentMax is the longest comment the iptables comment match
// holds (XT_MAX_COMMENT_LEN, 256, counts the terminating NUL).
const iptablesCommentMax = 255

// checkIPTablesComment fails when the marker comment of o, the longest
// comment Setup writes, does not fit in an iptables comment; iptables-restore
// would otherwise reject the line with a message that names neither.
func CheckIPTablesComment(o Owner) error {
	if n := len(IptablesMarkerComment(o)); n > iptablesCommentMax {
		return fmt.Errorf("iptables masquerade for network %q: the rule comment (network name, container ID %q, interface name in hex) is %d bytes, more than the %d iptables allows: use a shorter network name",
			o.Network, o.ContainerID, n, iptablesCommentMax)
	}
	return nil
}

// nftCommentMax is the longest comment nft accepts (NFT_USERDATA_MAXLEN is
// larger, but the nft tool refuses to add longer ones and we want its
// listing and editing to keep working).
const NftCommentMax = 128

// nftHash is upstream's h: the first 16 hex digits of SHA-512(s).
func nftHash(s string) string {
	sum := sha512.Sum512([]byte(s))
	return hex.EncodeToString(sum[:])[:16]
}

// nftOwnerHash is the part of the nftables comment that identifies the
// owner, upstream's: h(network) "-" h(ifname ":" containerID). It is always
// complete, even when the readable rest of the comment is cut at
// nftCommentMax, and its first half names the network (GC reads it).
func NftOwnerHash(o Owner) string {
	return nftHash(o.Network) + "-" + nftHash(o.IfName+":"+o.ContainerID)
}

// nftLegacyHash identified the owner in the comments our earlier releases
// wrote: 32 hex digits of SHA-256(network ":" ifname ":" containerID).
// Teardown, Check and GC still recognise it, so state made before the
// switch to upstream's names is not stranded; Setup replaces it.
func NftLegacyHash(o Owner) string {
	sum := sha256.Sum256([]byte(o.Network + ":" + o.IfName + ":" + o.ContainerID))
	return hex.EncodeToString(sum[:16])
}

// nftComment is the comment on an attachment's nftables rules, upstream's
// format:
//
//	<nftOwnerHash>, net: <network>, if: <ifname>, id: <containerID>
//
// with double quotes removed from the three names, cut to nftCommentMax
// bytes. Teardown and Check match on the hash; GC on its network half.
func NftComment(o Owner) string {
	unq := func(s string) string { return strings.ReplaceAll(s, `"`, "") }
	return cutComment(fmt.Sprintf("%s, net: %s, if: %s, id: %s", NftOwnerHash(o), unq(o.Network), unq(o.IfName), unq(o.ContainerID)))
}

// nftLegacyComment is the comment our earlier releases wrote (see
// nftLegacyHash).
func NftLegacyComment(o Owner) string {
	return cutComment(fmt.Sprintf("%s, net: %s, if: %s, id: %s", NftLegacyHash(o), o.Network, o.IfName, o.ContainerID))
}

func cutComment(c string) string {
	if len(c) > NftCommentMax {
		c = c[:NftCommentMax]
	}
	return c
}

// nftOwnerComment is what parseNFTComment reads from a comment of either
// form.
type NftOwnerComment struct {
	Hash   string // nftOwnerHash or nftLegacyHash
	Legacy bool
	// netHash is h(network) (upstream's form); network is the network as
	// written after "net: " (legacy form; possibly quote-stripped or cut
	// in upstream's form, so not used there).
	netHash, network string
}

// owns reports whether the comment is o's, in either form.
func (c NftOwnerComment) Owns(o Owner) bool {
	if c.Legacy {
		return c.Hash == NftLegacyHash(o)
	}
	return c.Hash == NftOwnerHash(o)
}

// inNetwork reports whether the comment belongs to network.
func (c NftOwnerComment) InNetwork(network string) bool {
	if c.Legacy {
		return c.network == network
	}
	return c.netHash == nftHash(network)
}

// parseNFTComment reads a comment made by nftComment or nftLegacyComment. ok
// is false for comments of another shape (rules we did not make) or, in the
// legacy form, when the network was cut off.
func ParseNFTComment(c string) (oc NftOwnerComment, ok bool) {
	hash, rest, found := strings.Cut(c, ", net: ")
	if !found {
		return oc, false
	}
	isHex := func(s string) bool { _, err := hex.DecodeString(s); return err == nil }
	switch {
	case len(hash) == 33 && hash[16] == '-' && isHex(hash[:16]) && isHex(hash[17:]):
		return NftOwnerComment{Hash: hash, netHash: hash[:16]}, true
	case len(hash) == 32 && isHex(hash):
		network, _, found := strings.Cut(rest, ", if: ")
		if !found {
			return oc, false
		}
		return NftOwnerComment{Hash: hash, Legacy: true, network: network}, true
	}
	return oc, false
}
