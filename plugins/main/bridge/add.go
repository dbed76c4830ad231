package bridge

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ipam"
	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/pkg/result"
	"github.com/cniforge/plugins/pkg/rollback"
)

// attachment is what one command works on: the parsed config, the two
// namespaces and netlink handles bound to them.
type attachment struct {
	conf   *config
	args   *skel.CmdArgs
	log    *slog.Logger
	hostNS *ns.NetNS
	hostH  *netlink.Handle
	contNS *ns.NetNS // nil when the command runs without one (DEL, GC)
	contH  *netlink.Handle
	// ownPorts are the ifindexes of bridge ports this ADD created, so an
	// undo can tell whether anyone else uses the bridge.
	ownPorts map[int]bool
}

// openAttachment opens the host namespace (the calling thread's); commands
// that need the container namespace call openContainer.
func openAttachment(conf *config, args *skel.CmdArgs, cmd string) (*attachment, error) {
	a := &attachment{conf: conf, args: args, log: plugin.Logger(cmd, args), ownPorts: map[int]bool{}}
	var err error
	if a.hostNS, a.hostH, err = ns.OpenHost(); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *attachment) openContainer() (err error) {
	a.contNS, a.contH, err = ns.OpenContainer(a.args.Netns)
	return err
}

func (a *attachment) close() {
	if a.contH != nil {
		a.contH.Close()
	}
	if a.contNS != nil {
		a.contNS.Close()
	}
	if a.hostH != nil {
		a.hostH.Close()
	}
	if a.hostNS != nil {
		a.hostNS.Close()
	}
}

func (a *attachment) owner() netfilter.Owner {
	return netfilter.Owner{Network: a.conf.Name, ContainerID: a.args.ContainerID, IfName: a.args.IfName}
}

func (p *bridgePlugin) cmdAdd(args *skel.CmdArgs) (err error) {
	conf, err := parseConfig(args.StdinData, args.Args)
	if err != nil {
		return err
	}
	a, err := openAttachment(conf, args, "ADD")
	if err != nil {
		return err
	}
	defer a.close()
	if err := a.openContainer(); err != nil {
		return err
	}

	var undo rollback.Stack
	defer func() {
		if err != nil {
			undo.Run(a.log)
		}
	}()
	res, err := p.add(a, &undo)
	if err != nil {
		return err
	}
	return result.Print(res, conf.CNIVersion)
}

// add runs the ADD steps, pushing the undo of each onto undo.
func (p *bridgePlugin) add(a *attachment, undo *rollback.Stack) (*current.Result, error) {
	conf, args := a.conf, a.args
	ctx := context.TODO()

	br, err := a.ensureBridge(undo)
	if err != nil {
		return nil, err
	}
	if err := p.stepDone("bridge"); err != nil {
		return nil, err
	}

	res := &current.Result{CNIVersion: current.ImplementedSpecVersion}
	if conf.layer3 {
		ipamRes, err := ipam.Add(ctx, conf.IPAM.Type, conf.raw)
		if err != nil {
			return nil, err
		}
		undo.Push("release ipam", func() error { return ipam.Del(ctx, conf.IPAM.Type, conf.raw) })
		if len(ipamRes.IPs) == 0 {
			return nil, fmt.Errorf("ipam %s returned no addresses", conf.IPAM.Type)
		}
		res.IPs, res.Routes, res.DNS = ipamRes.IPs, ipamRes.Routes, ipamRes.DNS
	}
	// Refuse a result the gateway settings cannot work with before any
	// link exists (pure: it only fills in gateways and default routes).
	gws, err := applyGateways(conf, res)
	if err != nil {
		return nil, err
	}
	if err := p.stepDone("ipam"); err != nil {
		return nil, err
	}

	hostVeth, err := a.setupVeth(undo)
	if err != nil {
		return nil, err
	}
	if err := p.stepDone("veth"); err != nil {
		return nil, err
	}

	if err := a.attachPort(br, hostVeth); err != nil {
		return nil, err
	}
	if err := p.stepDone("port"); err != nil {
		return nil, err
	}

	contLink, err := ip.LinkByName(a.contH, args.IfName)
	if err != nil {
		return nil, fmt.Errorf("in %s: %w", args.Netns, err)
	}
	// Interfaces in upstream's order: bridge, host veth, container end.
	res.Interfaces = []*current.Interface{
		{Name: br.Attrs().Name},
		{Name: hostVeth.Attrs().Name},
		{Name: args.IfName, Mac: contLink.Attrs().HardwareAddr.String(), Sandbox: args.Netns},
	}
	contIdx := 2
	for _, ipc := range res.IPs {
		ipc.Interface = &contIdx
	}
	if err := a.configureContainer(res, contLink); err != nil {
		return nil, err
	}
	if err := p.stepDone("container"); err != nil {
		return nil, err
	}

	if conf.IsGateway && len(gws) > 0 {
		if err := a.ensureGateway(br, gws, undo); err != nil {
			return nil, err
		}
	}
	if err := p.stepDone("gateway"); err != nil {
		return nil, err
	}

	if (conf.IsGateway || conf.IPMasq) && len(res.IPs) > 0 {
		var ips []net.IP
		for _, ipc := range res.IPs {
			ips = append(ips, ipc.Address.IP)
		}
		// The plugin's thread is in the host namespace (see pkg/ns).
		if err := ip.EnableForwarding(ips); err != nil {
			return nil, err
		}
	}
	if err := p.stepDone("forwarding"); err != nil {
		return nil, err
	}

	if conf.IPMasq && len(res.IPs) > 0 {
		if err := a.setupMasq(res, undo); err != nil {
			return nil, err
		}
	}
	if err := p.stepDone("masquerade"); err != nil {
		return nil, err
	}

	if conf.MacSpoofChk {
		if err := a.setupMacSpoofCheck(hostVeth, contLink.Attrs().HardwareAddr, undo); err != nil {
			return nil, err
		}
	}
	if err := p.stepDone("macspoof"); err != nil {
		return nil, err
	}

	if hostVeth, err = a.waitPort(hostVeth, p.portTimeout); err != nil {
		return nil, err
	}
	if err := p.stepDone("wait"); err != nil {
		return nil, err
	}

	// The bridge's MAC may have changed when the port joined (a bridge
	// without a set address takes its lowest port's): report it as it is now.
	br, err = ip.BridgeByName(a.hostH, br.Attrs().Name)
	if err != nil {
		return nil, err
	}
	res.Interfaces[0].Mac = br.Attrs().HardwareAddr.String()
	res.Interfaces[1].Mac = hostVeth.Attrs().HardwareAddr.String()
	if !conf.DNS.IsEmpty() {
		res.DNS = conf.DNS
	}
	return res, nil
}

// setupMasq installs the masquerade rules for the container's addresses.
func (a *attachment) setupMasq(res *current.Result, undo *rollback.Stack) error {
	m, err := netfilter.NewMasq(a.conf.IPMasqBackend)
	if err != nil {
		return err
	}
	var addrs []*net.IPNet
	for _, ipc := range res.IPs {
		addrs = append(addrs, &net.IPNet{IP: ipc.Address.IP, Mask: ipc.Address.Mask})
	}
	// The rules live in the host namespace: this runs on the plugin's
	// thread, which is in it (pkg/netfilter works on the calling thread's).
	// A failed Setup leaves nothing (nftables: one batch; iptables: undoes
	// the families it made), so the undo follows success.
	if err := m.Setup(a.owner(), addrs); err != nil {
		return fmt.Errorf("masquerade (%s): %w", m.Backend(), err)
	}
	undo.Push("remove masquerade rules", func() error { return m.Teardown(a.owner()) })
	return nil
}
