package bridge

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ipam"
	"github.com/cniforge/plugins/pkg/result"
	"github.com/cniforge/plugins/pkg/rollback"
)

// ensureBridge creates the bridge when missing and brings it up. The undo
// deletes a bridge this ADD created, unless another attachment joined it
// meanwhile.
func (a *attachment) ensureBridge(undo *rollback.Stack) (*netlink.Bridge, error) {
	conf := a.conf
	br, created, err := ip.EnsureBridge(a.hostH, ip.BridgeOptions{
		Name:          conf.Bridge,
		MTU:           conf.MTU,
		VlanFiltering: conf.vlanFiltering(),
		Promisc:       conf.PromiscMode,
	})
	if errors.Is(err, ip.ErrNotBridge) {
		// The config names a link it cannot use: the config is what to fix.
		return nil, result.InvalidConfig(fmt.Errorf("bridge: %q: %w", conf.Bridge, err))
	}
	if err != nil {
		return nil, fmt.Errorf("bridge: %w", err)
	}
	if created {
		undo.Push("delete bridge", func() error { return deleteBridgeIfUnused(a.hostH, conf.Bridge) })
		// Pin the random MAC the kernel gave it: otherwise the bridge takes
		// its lowest port's, and its MAC (in every result) changes as
		// containers come and go.
		if mac := br.Attrs().HardwareAddr; len(mac) == 6 {
			if err := a.hostH.LinkSetHardwareAddr(br, mac); err != nil {
				return nil, fmt.Errorf("pin MAC %s of bridge %q: %w", mac, conf.Bridge, err)
			}
		}
	}
	// A bridge with a gateway address must not configure itself from
	// router advertisements arriving from containers.
	err = ip.SetSysctl(fmt.Sprintf("net/ipv6/conf/%s/accept_ra", conf.Bridge), "0")
	if err != nil && !errors.Is(err, os.ErrNotExist) { // absent: IPv6 is disabled
		return nil, fmt.Errorf("bridge %q: %w", conf.Bridge, err)
	}
	return br, nil
}

// deleteBridgeIfUnused deletes the bridge unless it has ports: another
// attachment may have joined a bridge this ADD created before it failed.
func deleteBridgeIfUnused(h *netlink.Handle, name string) error {
	br, err := ip.BridgeByName(h, name)
	if errors.Is(err, ip.ErrLinkNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return ip.DelMasterIfUnused(h, br)
}

// setupVeth creates the veth pair, the container end directly in the
// container namespace, and returns both ends. Both carry the attachment's
// alias: DEL finds a leaked host end by it when the container namespace is
// gone, and deletes the container end only when it is ours.
func (a *attachment) setupVeth(undo *rollback.Stack) (hostVeth, contLink netlink.Link, err error) {
	hostVeth, err = ip.SetupVeth(a.hostH, ip.VethOptions{
		ContIfName: a.args.IfName,
		MTU:        a.conf.MTU,
		ContMAC:    a.conf.mac,
		ContNS:     int(a.contNS.Fd()),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("in %s: %w", a.args.Netns, err)
	}
	name := hostVeth.Attrs().Name
	undo.Push("delete veth "+name, func() error { return ip.DelLinkByName(a.hostH, name) })
	a.ownPorts[hostVeth.Attrs().Index] = true
	alias := ip.AttachmentAlias(a.args.ContainerID, a.args.IfName)
	if err := a.hostH.LinkSetAlias(hostVeth, alias); err != nil {
		return nil, nil, fmt.Errorf("set alias of %q: %w", name, err)
	}
	contLink, err = ip.LinkByName(a.contH, a.args.IfName)
	if err != nil {
		return nil, nil, fmt.Errorf("in %s: %w", a.args.Netns, err)
	}
	if err := a.contH.LinkSetAlias(contLink, alias); err != nil {
		return nil, nil, fmt.Errorf("set alias of %q in %s: %w", a.args.IfName, a.args.Netns, err)
	}
	return hostVeth, contLink, nil
}

// attachPort puts the host end on the bridge with the port settings and
// brings both ends up (the container end stays down with
// disableContainerInterface): the IPAM plugin, which runs next, may need
// the link (dhcp sends on it from inside the container namespace).
func (a *attachment) attachPort(br *netlink.Bridge, hostVeth, contLink netlink.Link) error {
	conf := a.conf
	err := ip.AttachPort(a.hostH, br, hostVeth, ip.PortOptions{
		Hairpin:         conf.HairpinMode,
		Isolated:        conf.PortIsolation,
		Vlan:            conf.Vlan,
		Trunk:           conf.trunks,
		KeepDefaultVlan: conf.PreserveDefaultVlan,
	})
	if err != nil {
		return err
	}
	if err := a.hostH.LinkSetUp(hostVeth); err != nil {
		return fmt.Errorf("set %q up: %w", hostVeth.Attrs().Name, err)
	}
	if conf.DisableContainerInterface {
		return nil
	}
	if err := a.contH.LinkSetUp(contLink); err != nil {
		return fmt.Errorf("set %q up in %s: %w", a.args.IfName, a.args.Netns, err)
	}
	return nil
}

// configureContainer gives the container end its addresses and routes
// (layer 3), then announces its IPv4 addresses. With
// disableContainerInterface it stays down.
func (a *attachment) configureContainer(res *current.Result, contLink netlink.Link) error {
	conf, args := a.conf, a.args
	if conf.DisableContainerInterface {
		return nil
	}
	if conf.layer3 {
		if err := ipam.ConfigureIface(a.contH, args.IfName, res, ipam.ConfigureOptions{DAD: conf.EnableDad}); err != nil {
			return fmt.Errorf("configure %q in %s: %w", args.IfName, args.Netns, err)
		}
	}
	var v4 []net.IP
	for _, ipc := range res.IPs {
		if ipc.Address.IP.To4() != nil {
			v4 = append(v4, ipc.Address.IP)
		}
	}
	if err := a.contNS.Do(func() error { return ip.SetArpNotify(args.IfName) }); err != nil {
		return fmt.Errorf("in %s: %w", args.Netns, err)
	}
	if len(v4) > 0 {
		// The link came up before IPAM ran (dhcp needs it), so the
		// kernel announces the addresses on a repeated MAC. Best effort,
		// as upstream: a lost announcement only delays neighbours until
		// their cache entry expires.
		if err := ip.Reannounce(a.contH, contLink); err != nil {
			a.log.Info("gratuitous arp failed", "err", err, "netns", args.Netns)
		}
	}
	if conf.layer3 && conf.EnableDad {
		if err := ip.WaitAddrsSettled(int(a.contNS.Fd()), contLink.Attrs().Index, dadTimeout); err != nil {
			return fmt.Errorf("%q in %s: %w", args.IfName, args.Netns, err)
		}
	}
	return nil
}

// dadTimeout bounds duplicate-address detection when enabledad asks for it.
const dadTimeout = 10 * time.Second

// waitPort waits until the host end is operationally up: only then has
// the kernel activated its queue, and frames sent earlier are dropped. A
// container end left down (disableContainerInterface) never gets there.
func (a *attachment) waitPort(hostVeth netlink.Link, timeout time.Duration) (netlink.Link, error) {
	if a.conf.DisableContainerInterface {
		return hostVeth, nil
	}
	l, err := ip.WaitLink(int(a.hostNS.Fd()), hostVeth.Attrs().Index, ip.OperUp, timeout)
	if err != nil {
		return nil, fmt.Errorf("bridge port: %w", err)
	}
	return l, nil
}
