// Package masq installs, checks and removes an attachment's masquerade
// (source NAT to the outgoing interface's address for traffic leaving the
// container's addresses for destinations outside their subnet), through
// iptables or through nftables, behind netfilter.Masq. bridge and ptp ask
// for it through pkg/attach/masquerade, and the node tool's repair
// directly; no other plugin links it.
//
// It never touches another concern's rules (port forwards, firewall,
// MAC spoof filter), and never another owner's: every rule is found by
// its owner's tag.
//
// # Ownership
//
// Rules belong to one attachment, identified by an Owner. The layout follows
// the upstream plugin suite so that a node can switch suites with pods
// running, and a DEL from either suite removes what the other's ADD made:
//
//   - iptables: nat table; a chain "CNI-" + the first 24 hex digits of
//     SHA-512(network + containerID); in POSTROUTING a jump to it per container
//     address; in the chain an ACCEPT for the container's subnet and a
//     MASQUERADE for everything but multicast. Every rule carries the comment
//     `name: "<network>" id: "<containerID>"`. The chain name cannot carry
//     the interface name, so two attachments of one container to one network
//     share a chain (as upstream). Each attachment therefore also puts in the
//     chain, per address, a marker: a rule with no target (a no-op) matching
//     "-s <address> -d <subnet>" with the comment
//     `name: "<network>" id: "<containerID>" if: <ifname in hex>` (hex
//     because interface names may hold quotes and backslashes, which
//     iptables-save escapes; the whole comment must fit in 255 bytes, which
//     Setup checks first). Setup merges
//     (other interfaces' markers and jumps stay, ACCEPTs for every subnet,
//     one MASQUERADE last); Teardown removes its own markers and jumps, and
//     the chain only when nothing else is in it. Each change holds a flock
//     on its chain (/run/cniforge/iptables/bucket-<hash>.lock, 256 files
//     shared by all chains) from its read to its write. Upstream's DEL deletes its
//     jump by exact spec and then flushes and deletes the chain, markers
//     included, so the jumps keep upstream's exact form. Upstream's ADD of
//     another interface appends its ACCEPT and MASQUERADE after ours; Check
//     accepts that. A chain with no
//     marker at all was made by upstream: Check does not ask for markers
//     there, and Teardown of any interface removes it whole, as upstream's
//     DEL does (upstream cannot tell its interfaces apart either).
//
//     Two consequences of unmarked (upstream-made) jumps, accepted as
//     such: (a) a repeated Teardown of an interface (its markers already
//     gone) in a chain that holds only unmarked jumps removes the whole
//     chain, the jumps of interfaces upstream attached included, exactly
//     as upstream's own DEL does; (b) GC never collects a stale unmarked jump
//     in a chain that still has a kept owner, since nothing says which
//     interface it belongs to (it and the chain's ACCEPTs stay until the
//     chain's last owner goes).
//
//   - nftables: table "inet cni_plugins_masquerade"; a base chain
//     "postrouting" (nat hook, priority srcnat) returns for multicast and
//     jumps to "masq_checks", which holds one rule per container address:
//     saddr = address, daddr != its subnet -> masquerade. Each rule's comment
//     (userdata, as nft shows it) is upstream's:
//     "<h(network)>-<h(ifname:containerID)>, net: <network>, if: <ifname>,
//     id: <containerID>", h being the first 16 hex digits of SHA-512, double
//     quotes removed from the names, cut to 128 bytes. Teardown and Check
//     match the hash; GC matches its first half, h(network). Comments in the
//     form of our earlier releases (32 hex digits of
//     SHA-256(network:ifname:containerID), then the same text) are still
//     found by Teardown, Check and GC, and Setup replaces them. Teardown
//     removes the rules only: the table and chains are shared.
//
// # Exclusions (ipMasqExcludeCIDRs, beyond upstream)
//
// NewMasq's exclude lists destinations left unmasqueraded besides the
// container's subnet (a cluster's pod CIDR). iptables: per address and
// excluded CIDR one more marker of the interface ("-s <address> -d
// <CIDR>") and an ACCEPT of the CIDR before the MASQUERADE, so merges,
// Teardown and GC keep or drop them with the interface's other markers,
// and upstream's DEL flushes them with the chain. nftables: per address
// and CIDR a rule "saddr = address, daddr in CIDR -> return" before the
// address's masquerade rule, with the owner's comment, so Teardown, GC and
// upstream's DEL remove it like the masquerade rule. Setup installs and
// Check asks for them; Teardown and GC need not be told.
//
// # Cost
//
// The nftables backend runs no process: every call is one netlink socket,
// a read, and at most one batch, which the kernel applies entirely or not at
// all. The iptables backend applies each family's change with one
// iptables-restore (one transaction of the nat table), never a string of
// single-rule iptables calls; see iptablesMasq for the counts.
package masq
