package kernelfeature

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// SCTP: SCTP sockets (IPv4, one-to-one style), for specs that send real
// SCTP traffic through a port mapping. The kernel of the CI host is built
// without CONFIG_IP_SCTP (its conntrack and NAT still know the protocol);
// the VM lane's Debian kernel has the sctp module. It is not in All: no
// plugin needs it, only traffic in tests.
var SCTP = Feature{Name: "sctp", Tries: "opening an SCTP socket in a namespace", probe: probeSCTP}

func probeSCTP(p *prober) error {
	return p.n.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_SCTP)
		if err != nil {
			return fmt.Errorf("socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP): %w", err)
		}
		return unix.Close(fd)
	})
}
