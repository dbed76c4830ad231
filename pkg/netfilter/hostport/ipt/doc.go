// Package ipt is the iptables backend of port forwarding (package
// hostport), in upstream's layout (rules.go): the nat chains
// CNI-HOSTPORT-DNAT, CNI-DN-<hash>, CNI-HOSTPORT-SETMARK and
// CNI-HOSTPORT-MASQ, and the raw-table guard CNI-HOSTPORT-GUARD for
// route_localnet. Changes go through iptables-save and iptables-restore,
// except on iptables-nft, where an ADD beside other attachments writes and
// a Check reads over netlink (nftadd.go, nftcheck.go).
package ipt

import "github.com/cniforge/plugins/pkg/netfilter/hostport"

// New returns the iptables port-forwarding backend. It acts on the calling
// thread's network namespace.
func New() hostport.PortMap { return newIPTablesPortMap() }
