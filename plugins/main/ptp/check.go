package ptp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ipam"
	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/result"
)

// cmdCheck compares the kernel with the result ADD returned (prevResult):
// the container end, its MAC, addresses and routes; the host end, its
// gateway addresses and host routes; the masquerade rules; the IPAM
// reservation. It changes nothing.
func (p *ptp) cmdCheck(args *skel.CmdArgs) (err error) {
	conf, err := parseConfig(args.StdinData)
	if err != nil {
		return err
	}
	prev := conf.prevResult
	if prev == nil {
		return result.InvalidConfig(errors.New("prevResult: missing; CHECK compares the kernel with the result of ADD"))
	}
	if err := ipam.Check(context.TODO(), conf.IPAM.Type, args.StdinData); err != nil {
		return fmt.Errorf("ipam %s CHECK: %w", conf.IPAM.Type, err)
	}
	contIdx := result.InterfaceIndex(prev, args.IfName, args.Netns)
	if contIdx < 0 {
		return fmt.Errorf("prevResult lists no interface %q in %s", args.IfName, args.Netns)
	}
	ipcs := result.IPsOf(prev, contIdx)

	hostNS, hostH, err := ns.OpenHost()
	if err != nil {
		return err
	}
	defer hostNS.Close()
	defer hostH.Close()
	contNS, contH, err := ns.OpenContainer(args.Netns)
	if err != nil {
		return err
	}
	defer contNS.Close()
	defer contH.Close()

	contLink, err := checkContainer(contH, args.Netns, prev.Interfaces[contIdx], ipcs, prev.Routes)
	if err != nil {
		return err
	}
	if err := checkHost(hostH, hostNS.Path(), contH, contLink, prev, ipcs); err != nil {
		return err
	}
	if conf.IPMasq {
		masq, err := netfilter.NewMasq(conf.backend())
		if err != nil {
			return err
		}
		var addrs []*net.IPNet
		for _, ipc := range ipcs {
			addrs = append(addrs, &net.IPNet{IP: ipc.Address.IP, Mask: ipc.Address.Mask})
		}
		if err := masq.Check(ownerOf(conf, args), addrs); err != nil {
			return fmt.Errorf("masquerade (%s) in %s: %w", masq.Backend(), hostNS.Path(), err)
		}
	}
	return nil
}

// checkContainer checks the container end: a veth, up, with the MAC, the
// addresses and the routes ADD reported (plus the per-address gateway
// routes ADD adds but a result cannot mark as ptp's).
func checkContainer(contH *netlink.Handle, nsPath string, iface *current.Interface, ipcs []*current.IPConfig, ipamRoutes []*types.Route) (netlink.Link, error) {
	link, err := ip.LinkByName(contH, iface.Name)
	if err != nil {
		return nil, fmt.Errorf("in %s: %w", nsPath, err)
	}
	if _, ok := link.(*netlink.Veth); !ok {
		return nil, fmt.Errorf("%q in %s is a %s, not a veth", iface.Name, nsPath, link.Type())
	}
	if err := checkMAC(link, iface.Mac); err != nil {
		return nil, fmt.Errorf("in %s: %w", nsPath, err)
	}
	if link.Attrs().Flags&net.FlagUp == 0 {
		return nil, fmt.Errorf("%q is down in %s", iface.Name, nsPath)
	}
	have, err := addrsOn(contH, link)
	if err != nil {
		return nil, fmt.Errorf("in %s: %w", nsPath, err)
	}
	if err := result.CheckAddrs(iface.Name, ipcs, have); err != nil {
		return nil, fmt.Errorf("in %s: %w", nsPath, err)
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
		// Only main-table routes are listed below.
		if r.Table == nil || *r.Table == 0 || *r.Table == mainTable {
			want = append(want, r)
		}
	}
	routes, err := ip.RoutesOn(contH, link)
	if err != nil {
		return nil, fmt.Errorf("in %s: %w", nsPath, err)
	}
	if err := result.CheckRoutes(iface.Name, want, routes); err != nil {
		return nil, fmt.Errorf("in %s: %w", nsPath, err)
	}
	return link, nil
}

const mainTable = 254 // RT_TABLE_MAIN

// checkHost checks the container end's peer in the host: the host end ADD
// reported, up, with each gateway as a /32 (/128) and a host route to each
// container address.
func checkHost(hostH *netlink.Handle, hostPath string, contH *netlink.Handle, contLink netlink.Link, prev *current.Result, ipcs []*current.IPConfig) error {
	peer, err := ip.PeerIndex(contH, contLink)
	if err != nil {
		return err
	}
	link, err := hostH.LinkByIndex(peer)
	if err != nil {
		return fmt.Errorf("host end of %q (ifindex %d) missing in %s: %w", contLink.Attrs().Name, peer, hostPath, err)
	}
	name := link.Attrs().Name
	for _, iface := range prev.Interfaces {
		if iface.Sandbox != "" {
			continue
		}
		if iface.Name != name {
			return fmt.Errorf("host end of %q in %s is %q, prevResult says %q", contLink.Attrs().Name, hostPath, name, iface.Name)
		}
		if err := checkMAC(link, iface.Mac); err != nil {
			return fmt.Errorf("in %s: %w", hostPath, err)
		}
		break
	}
	if link.Attrs().Flags&net.FlagUp == 0 {
		return fmt.Errorf("%q is down in %s", name, hostPath)
	}
	have, err := addrsOn(hostH, link)
	if err != nil {
		return fmt.Errorf("in %s: %w", hostPath, err)
	}
	var wantAddrs []*current.IPConfig
	var wantRoutes []*types.Route
	for _, ipc := range ipcs {
		if ipc.Gateway != nil {
			wantAddrs = append(wantAddrs, &current.IPConfig{Address: net.IPNet{IP: ipc.Gateway, Mask: hostMask(ipc.Gateway)}})
		}
		wantRoutes = append(wantRoutes, &types.Route{Dst: net.IPNet{IP: ipc.Address.IP, Mask: hostMask(ipc.Address.IP)}})
	}
	if err := result.CheckAddrs(name, wantAddrs, have); err != nil {
		return fmt.Errorf("in %s: %w", hostPath, err)
	}
	routes, err := ip.RoutesOn(hostH, link)
	if err != nil {
		return fmt.Errorf("in %s: %w", hostPath, err)
	}
	if err := result.CheckRoutes(name, wantRoutes, routes); err != nil {
		return fmt.Errorf("in %s: %w", hostPath, err)
	}
	return nil
}

func checkMAC(link netlink.Link, want string) error {
	if want == "" {
		return nil
	}
	have := link.Attrs().HardwareAddr.String()
	if !strings.EqualFold(have, want) {
		return fmt.Errorf("%q has MAC %s, want %s", link.Attrs().Name, have, want)
	}
	return nil
}

func addrsOn(h *netlink.Handle, link netlink.Link) ([]net.IPNet, error) {
	addrs, err := ip.AddrList(h, link, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("addresses of %q: %w", link.Attrs().Name, err)
	}
	out := make([]net.IPNet, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, *a.IPNet)
	}
	return out, nil
}
