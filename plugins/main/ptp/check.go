package ptp

import (
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/attach/masquerade"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ns"
)

// check compares the kernel with the result ADD returned (prevResult),
// after the frame ran IPAM's CHECK: the container end, its MAC, addresses
// and routes; the host end, its name, MAC, gateway addresses and host
// routes; the masquerade rules. It changes nothing.
func check(a *attach.Attachment, conf *netConf, prev *current.Result) error {
	contIdx, ipcs, err := a.ContainerIface(prev)
	if err != nil {
		return err
	}
	hostNS, hostH, err := a.Host()
	if err != nil {
		return err
	}
	contNS, contH, err := a.Container()
	if err != nil {
		return err
	}
	contLink, err := checkContainer(contNS, contH, prev.Interfaces[contIdx], ipcs, prev.Routes)
	if err != nil {
		return err
	}
	if err := checkHost(hostNS, hostH, contNS, contLink, prev, ipcs); err != nil {
		return err
	}
	if err := masquerade.Check(a, &conf.Masq, ipcs); err != nil {
		return fmt.Errorf("in %s: %w", hostNS.Path(), err)
	}
	return nil
}

// checkContainer checks the container end: a veth, up, with the MAC, the
// addresses and the routes ADD reported (plus the per-address gateway
// routes ADD adds but a result cannot mark as ptp's).
func checkContainer(contNS *ns.NetNS, contH *netlink.Handle, iface *current.Interface, ipcs []*current.IPConfig, ipamRoutes []*types.Route) (netlink.Link, error) {
	link, err := attach.CheckLink(contNS, contH, iface.Name, "veth", true)
	if err != nil {
		return nil, err
	}
	if err := attach.CheckMAC(contNS, link, iface.Mac); err != nil {
		return nil, err
	}
	if err := attach.CheckAddrs(contNS, contH, link, ipcs); err != nil {
		return nil, err
	}
	var want []*types.Route
	for _, ipc := range ipcs {
		if ipc.Gateway == nil {
			continue
		}
		want = append(want, &types.Route{Dst: net.IPNet{IP: ipc.Gateway, Mask: hostMask(ipc.Gateway)}})
		if ones, bits := ipc.Address.Mask.Size(); ones != bits {
			want = append(want, &types.Route{Dst: *subnetOf(ipc.Address), GW: ipc.Gateway})
		}
	}
	for _, r := range ipamRoutes {
		// A route IPAM puts in a table of its own is not compared:
		// CheckRoutes looks in main and the source rules' tables.
		if r.Table == nil || *r.Table == 0 || *r.Table == mainTable {
			want = append(want, r)
		}
	}
	if err := attach.CheckRoutes(contNS, contH, link, want); err != nil {
		return nil, err
	}
	return link, nil
}

const mainTable = 254 // RT_TABLE_MAIN

// checkHost checks the container end's peer in the host: the host end ADD
// reported (name and MAC), up, with each gateway as a /32 (/128) and a
// host route to each container address.
func checkHost(hostNS *ns.NetNS, hostH *netlink.Handle, contNS *ns.NetNS, contLink netlink.Link, prev *current.Result, ipcs []*current.IPConfig) error {
	peer, err := ip.PeerIndex(nil, contLink)
	if err != nil {
		return fmt.Errorf("in %s: %w", contNS.Path(), err)
	}
	link, err := hostH.LinkByIndex(peer)
	if err != nil {
		return fmt.Errorf("host end of %q (ifindex %d) missing in %s: %w", contLink.Attrs().Name, peer, hostNS.Path(), err)
	}
	name := link.Attrs().Name
	for _, iface := range prev.Interfaces {
		if iface.Sandbox != "" {
			continue
		}
		if iface.Name != name {
			return fmt.Errorf("host end of %q in %s is %q, prevResult says %q", contLink.Attrs().Name, hostNS.Path(), name, iface.Name)
		}
		if err := attach.CheckMAC(hostNS, link, iface.Mac); err != nil {
			return err
		}
		break
	}
	if _, err := attach.CheckLink(hostNS, hostH, name, "veth", true); err != nil {
		return err
	}
	var wantAddrs []*current.IPConfig
	var wantRoutes []*types.Route
	for _, ipc := range ipcs {
		if ipc.Gateway != nil {
			wantAddrs = append(wantAddrs, &current.IPConfig{Address: net.IPNet{IP: ipc.Gateway, Mask: hostMask(ipc.Gateway)}})
		}
		wantRoutes = append(wantRoutes, &types.Route{Dst: net.IPNet{IP: ipc.Address.IP, Mask: hostMask(ipc.Address.IP)}})
	}
	if err := attach.CheckAddrs(hostNS, hostH, link, wantAddrs); err != nil {
		return err
	}
	return attach.CheckRoutes(hostNS, hostH, link, wantRoutes)
}
