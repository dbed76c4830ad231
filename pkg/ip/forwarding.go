package ip

import (
	"net"
)

// Forwarding sysctls, slashed form (see SetSysctl).
const (
	sysctlForwardV4 = "net/ipv4/ip_forward"
	sysctlForwardV6 = "net/ipv6/conf/all/forwarding"
)

// EnableForwarding turns on IP forwarding for the address families of ips
// (one IPv4 address enables IPv4 forwarding, one IPv6 address IPv6). It
// writes a sysctl only when it is not already on, so a host that manages
// forwarding itself sees no writes. It works in the network namespace of the
// calling thread (call it inside ns.NetNS.Do for another one).
//
// Forwarding is a namespace-wide setting other attachments rely on, so
// nothing here turns it off again.
func EnableForwarding(ips []net.IP) error {
	var v4, v6 bool
	for _, a := range ips {
		if a == nil {
			continue
		}
		if a.To4() != nil {
			v4 = true
		} else {
			v6 = true
		}
	}
	if v4 {
		if err := ensureSysctl(sysctlForwardV4, "1"); err != nil {
			return err
		}
	}
	if v6 {
		if err := ensureSysctl(sysctlForwardV6, "1"); err != nil {
			return err
		}
	}
	return nil
}

// ensureSysctl writes value to name unless it already holds it.
func ensureSysctl(name, value string) error {
	if cur, err := GetSysctl(name); err == nil && cur == value {
		return nil
	}
	return SetSysctl(name, value)
}
