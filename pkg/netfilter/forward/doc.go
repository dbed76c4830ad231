// Package forward installs, checks and removes the firewall plugin's
// rules (forward/allow rules per container address, the ingress isolation
// chains, the admin chain), through iptables or through nftables, behind
// Forward. Only the firewall plugin links it.
//
// It never touches another concern's rules, nor another owner's.
package forward
