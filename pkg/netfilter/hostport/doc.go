// Package hostport installs, checks and removes port forwards (portmap's
// DNAT, hairpin SNAT and the route_localnet guard), through iptables or
// through nftables, behind PortMap, in upstream's layout: chains and
// comments on iptables, the cni_hostport tables and their sets on
// nftables. Only the portmap plugin links it (the node tool through it).
//
// It never touches another concern's rules, nor another owner's.
package hostport
