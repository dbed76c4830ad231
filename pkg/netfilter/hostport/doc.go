// Package hostport describes port forwards (portmap's DNAT, hairpin SNAT
// and the route_localnet guard) and the PortMap interface that installs,
// checks and removes them, in upstream's layout: chains and comments on
// iptables, the cni_hostport tables and their sets on nftables. Only the
// portmap plugin links it (the node tool through it).
//
//	hostport           PortMapping, PortMapOptions, PortMap, ValidateMapping
//	hostport/ipt       the iptables backend (iptables-restore, and netlink on iptables-nft)
//	hostport/nft       the nftables backend (netlink)
//	hostport/backends  NewPortMap (upstream's choice of backend), and DEL
//	                   and GC through both backends
//
// It never touches another concern's rules, nor another owner's.
package hostport
