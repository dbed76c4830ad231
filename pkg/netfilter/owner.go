package netfilter

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
)

// iptablesChain is the nat chain of one attachment: "CNI-" and the first 24
// hex digits of SHA-512(network + containerID), as upstream names it, so a
// DEL from either suite finds the other's chain. The interface name is not
// part of it (upstream's layout has no room for it).
func iptablesChain(o Owner) string {
	sum := sha512.Sum512([]byte(o.Network + o.ContainerID))
	return "CNI-" + hex.EncodeToString(sum[:])[:24]
}

// iptablesChainRE matches chain names made by iptablesChain.
var iptablesChainRE = regexp.MustCompile(`^CNI-[0-9a-f]{24}$`)

// iptablesComment is the comment on every rule of an attachment, upstream's
// format. Network names and container IDs cannot hold '"' or '\' (CNI
// restricts both to [a-zA-Z0-9_.-]), so %q adds nothing but the quotes.
func iptablesComment(o Owner) string {
	return fmt.Sprintf("name: %q id: %q", o.Network, o.ContainerID)
}

// iptablesMarkerComment is the comment of an attachment's marker rules
// (see iptablesRules): upstream's comment, then the interface name in hex.
// Interface names may hold '"', '\\' and '\” (skel and the kernel allow
// them), which iptables-save escapes in ways that do not round-trip through
// our quoting; hex digits come back from iptables-save exactly as written.
func iptablesMarkerComment(o Owner) string {
	return fmt.Sprintf("%s if: %x", iptablesComment(o), o.IfName)
}

// iptablesCommentMax is the longest comment the iptables comment match
// holds (XT_MAX_COMMENT_LEN, 256, counts the terminating NUL).
const iptablesCommentMax = 255

// checkIPTablesComment fails when the marker comment of o, the longest
// comment Setup writes, does not fit in an iptables comment; iptables-restore
// would otherwise reject the line with a message that names neither.
func checkIPTablesComment(o Owner) error {
	if n := len(iptablesMarkerComment(o)); n > iptablesCommentMax {
		return fmt.Errorf("iptables masquerade for network %q: the rule comment (network name, container ID %q, interface name in hex) is %d bytes, more than the %d iptables allows: use a shorter network name",
			o.Network, o.ContainerID, n, iptablesCommentMax)
	}
	return nil
}

// iptablesCommentRE reads the network and container ID back from a comment
// as iptables-save prints it (quotes escaped with backslashes).
var iptablesCommentRE = regexp.MustCompile(`--comment "name: \\"([^"\\]*)\\" id: \\"([^"\\]*)\\""`)

// nftCommentMax is the longest comment nft accepts (NFT_USERDATA_MAXLEN is
// larger, but the nft tool refuses to add longer ones and we want its
// listing and editing to keep working).
const nftCommentMax = 128

// nftOwnerHash is the part of the nftables comment that identifies the owner:
// 32 hex digits of SHA-256(network ":" ifname ":" containerID). It is always
// complete, even when the readable rest of the comment is cut at
// nftCommentMax.
func nftOwnerHash(o Owner) string {
	sum := sha256.Sum256([]byte(o.Network + ":" + o.IfName + ":" + o.ContainerID))
	return hex.EncodeToString(sum[:16])
}

// nftComment is the comment on an attachment's nftables rules:
//
//	<nftOwnerHash>, net: <network>, if: <ifname>, id: <containerID>
//
// cut to nftCommentMax bytes. Teardown and Check match on the hash; GC reads
// the network back from "net: ..." (network names cannot contain ',').
func nftComment(o Owner) string {
	c := fmt.Sprintf("%s, net: %s, if: %s, id: %s", nftOwnerHash(o), o.Network, o.IfName, o.ContainerID)
	if len(c) > nftCommentMax {
		c = c[:nftCommentMax]
	}
	return c
}

// parseNFTComment returns the owner hash and the network of a comment made by
// nftComment. ok is false for comments of another shape (rules we did not
// make) or when the network was cut off.
func parseNFTComment(c string) (hash, network string, ok bool) {
	hash, rest, found := strings.Cut(c, ", net: ")
	if !found || len(hash) != 32 {
		return "", "", false
	}
	if _, err := hex.DecodeString(hash); err != nil {
		return "", "", false
	}
	network, _, found = strings.Cut(rest, ", if: ")
	if !found {
		return "", "", false
	}
	return hash, network, true
}
