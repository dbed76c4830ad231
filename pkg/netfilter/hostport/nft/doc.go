// Package nft is the nftables backend of port forwarding (package
// hostport), in upstream's layout (rules.go): the tables "ip cni_hostport"
// and "ip6 cni_hostport", whose mappings are elements of verdict-free
// maps, so a lookup costs the same for 1 or 1000 mappings. It speaks
// netlink directly: no nft process.
package nft

import "github.com/cniforge/plugins/pkg/netfilter/hostport"

// New returns the nftables port-forwarding backend. It acts on the calling
// thread's network namespace; its TeardownOf is Teardown for a DEL that
// knows the attachment's mappings.
func New() hostport.PortMap { return newNFTablesPortMap() }
