package bridge

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ipam"
	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/result"
)

// cmdCheck compares the kernel with the prevResult ADD returned: the bridge,
// both veth ends and how they are linked, the container's MAC, addresses and
// routes, and the masquerade and MAC spoof-check rules.
func (p *bridgePlugin) cmdCheck(args *skel.CmdArgs) error {
	conf, err := parseConfig(args.StdinData, args.Args)
	if err != nil {
		return err
	}
	prev := conf.prevResult
	if prev == nil {
		return result.InvalidConfig(errors.New("prevResult: missing (CHECK needs the result of ADD)"))
	}
	if conf.layer3 {
		if err := ipam.Check(context.TODO(), conf.IPAM.Type, conf.raw); err != nil {
			return err
		}
	}
	a, err := openAttachment(conf, args, "CHECK")
	if err != nil {
		return err
	}
	defer a.close()
	if err := a.openContainer(); err != nil {
		return err
	}
	return a.check(prev)
}

func (a *attachment) check(prev *current.Result) error {
	conf, args := a.conf, a.args
	contIdx := result.InterfaceIndex(prev, args.IfName, args.Netns)
	if contIdx < 0 {
		return fmt.Errorf("prevResult: no interface %q in sandbox %s", args.IfName, args.Netns)
	}
	brIdx := result.InterfaceIndex(prev, conf.Bridge, "")
	if brIdx < 0 {
		return fmt.Errorf("prevResult: no bridge %q", conf.Bridge)
	}
	hostIdx := -1
	for i, iface := range prev.Interfaces {
		if i != brIdx && iface.Sandbox == "" {
			hostIdx = i
		}
	}
	if hostIdx < 0 {
		return errors.New("prevResult: no host veth interface")
	}

	br, err := ip.BridgeByName(a.hostH, conf.Bridge)
	if err != nil {
		return fmt.Errorf("bridge: %w", err)
	}
	// The bridge's MAC is not compared: a bridge whose MAC nobody set
	// follows its lowest port's, so it changes as other containers come and
	// go without anything being wrong with this attachment.
	hostName := prev.Interfaces[hostIdx].Name
	hostVeth, err := ip.LinkByName(a.hostH, hostName)
	if err != nil {
		return fmt.Errorf("host veth: %w", err)
	}
	if _, ok := hostVeth.(*netlink.Veth); !ok {
		return fmt.Errorf("host interface %q is a %s, not a veth", hostName, hostVeth.Type())
	}
	if hostVeth.Attrs().MasterIndex != br.Attrs().Index {
		return fmt.Errorf("host veth %q is not a port of bridge %q", hostName, conf.Bridge)
	}
	contLink, err := ip.LinkByName(a.contH, args.IfName)
	if err != nil {
		return fmt.Errorf("in %s: %w", args.Netns, err)
	}
	if _, ok := contLink.(*netlink.Veth); !ok {
		return fmt.Errorf("%q in %s is a %s, not a veth", args.IfName, args.Netns, contLink.Type())
	}
	if err := sameMAC(contLink, prev.Interfaces[contIdx].Mac); err != nil {
		return fmt.Errorf("in %s: %w", args.Netns, err)
	}
	if peer, err := ip.PeerIndex(a.contH, contLink); err != nil || peer != hostVeth.Attrs().Index {
		return fmt.Errorf("%q in %s is not the peer of host veth %q", args.IfName, args.Netns, hostName)
	}
	if peer, err := ip.PeerIndex(a.hostH, hostVeth); err != nil || peer != contLink.Attrs().Index {
		return fmt.Errorf("host veth %q is not the peer of %q in %s", hostName, args.IfName, args.Netns)
	}

	want := result.IPsOf(prev, contIdx)
	if err := a.checkAddrsRoutes(contLink, want, prev); err != nil {
		return err
	}
	if conf.IPMasq && len(want) > 0 {
		m, err := netfilter.NewMasq(conf.IPMasqBackend)
		if err != nil {
			return err
		}
		var addrs []*net.IPNet
		for _, ipc := range want {
			addrs = append(addrs, &net.IPNet{IP: ipc.Address.IP, Mask: ipc.Address.Mask})
		}
		if err := m.Check(a.owner(), addrs); err != nil {
			return err
		}
	}
	if conf.MacSpoofChk {
		sc := netfilter.MacSpoofCheck{Owner: a.owner(), Port: hostName, MAC: contLink.Attrs().HardwareAddr}
		if err := sc.Check(); err != nil {
			return err
		}
	}
	return nil
}

func (a *attachment) checkAddrsRoutes(contLink netlink.Link, want []*current.IPConfig, prev *current.Result) error {
	ifName := a.args.IfName
	addrs, err := ip.AddrList(a.contH, contLink, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("addresses of %q in %s: %w", ifName, a.args.Netns, err)
	}
	have := make([]net.IPNet, 0, len(addrs))
	for _, ad := range addrs {
		have = append(have, *ad.IPNet)
	}
	if err := result.CheckAddrs(ifName, want, have); err != nil {
		return fmt.Errorf("in %s: %w", a.args.Netns, err)
	}
	haveRoutes, err := ip.RoutesOn(a.contH, contLink)
	if err != nil {
		return fmt.Errorf("in %s: %w", a.args.Netns, err)
	}
	if err := result.CheckRoutes(ifName, prev.Routes, haveRoutes); err != nil {
		return fmt.Errorf("in %s: %w", a.args.Netns, err)
	}
	return nil
}

func sameMAC(l netlink.Link, want string) error {
	if want == "" {
		return nil
	}
	mac, err := net.ParseMAC(want)
	if err != nil {
		return fmt.Errorf("prevResult: MAC %q of %q: %w", want, l.Attrs().Name, err)
	}
	if l.Attrs().HardwareAddr.String() != mac.String() {
		return fmt.Errorf("%q has MAC %s, prevResult says %s", l.Attrs().Name, l.Attrs().HardwareAddr, mac)
	}
	return nil
}
