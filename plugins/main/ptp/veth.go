package ptp

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ns"
)

// hostVethName derives the host end's name from the attachment rather than
// picking a random one, so DEL can find and remove a host end whose
// container namespace is no longer reachable by path (unmounted, but kept
// alive by a stray reference: the pair then outlives the DEL that would
// have removed it through the container end).
func hostVethName(network, containerID, ifName string) string {
	sum := sha256.Sum256([]byte(network + "\x00" + containerID + "\x00" + ifName))
	return "veth" + hex.EncodeToString(sum[:4])
}

// setupVeth creates the pair: hostName in the host namespace (hostH),
// contIfName in contNS. Both ends stay down.
func setupVeth(hostH *netlink.Handle, contNS *ns.NetNS, hostName, contIfName string, mtu int) (netlink.Link, error) {
	l, err := ip.SetupVeth(hostH, ip.VethOptions{
		ContIfName: contIfName,
		HostIfName: hostName,
		MTU:        mtu,
		ContNS:     int(contNS.Fd()),
	})
	if err != nil {
		return nil, fmt.Errorf("in %s: %w", contNS.Path(), err)
	}
	return l, nil
}
