// Package iptnft reads and writes iptables-nft's rules over netlink
// instead of running iptables: the expressions iptables-nft encodes for a
// rule (so a rule written here is one iptables-save prints and
// iptables-restore deletes), the iptables-save spec of a rule read back,
// and chain reads and deletions of the ip/ip6 tables. Anything it cannot
// prove it encodes as iptables-nft would, it refuses, and the caller falls
// back to iptables-restore.
//
// It never decides which rules a rule set needs.
package iptnft
