package ptp

import (
	"context"
	"fmt"
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

// cmdAdd wires the container: IPAM, veth pair, container end, host end,
// forwarding, masquerade, announcement. Each change registers its undo as
// soon as it exists; a failure runs them in reverse, IPAM release included.
func (p *ptp) cmdAdd(args *skel.CmdArgs) (err error) {
	conf, err := parseConfig(args.StdinData)
	if err != nil {
		return err
	}
	log := plugin.Logger("ADD", args)
	ctx := context.TODO()

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

	var undo rollback.Stack
	defer func() {
		if err != nil {
			undo.Run(log)
		}
	}()

	res, ierr := ipam.Add(ctx, conf.IPAM.Type, args.StdinData)
	if ierr != nil {
		return ierr
	}
	undo.Push("release ipam", func() error { return ipam.Del(ctx, conf.IPAM.Type, args.StdinData) })
	if err := validateIPAMResult(conf.IPAM.Type, res); err != nil {
		return err
	}
	if err := p.after(StepIPAM); err != nil {
		return err
	}

	hostName := hostVethName(conf.Name, args.ContainerID, args.IfName)
	alias := ip.AttachmentAlias(args.ContainerID, args.IfName)
	hostLink, err := setupVeth(hostH, contH, contNS, hostName, args.IfName, alias, conf.MTU, hasV6(res))
	if err != nil {
		return err
	}
	// Deleting one end deletes the pair, and with it every address and
	// route the next two steps put on either end.
	undo.Push("delete veth "+hostName, func() error { return ip.DelLinkByName(hostH, hostName) })
	if err := p.after(StepVeth); err != nil {
		return err
	}

	if err := configureContainer(contNS, contH, args.IfName, res); err != nil {
		return err
	}
	if err := p.after(StepContainer); err != nil {
		return err
	}
	if err := configureHost(hostH, hostNS.Path(), hostLink, res); err != nil {
		return err
	}
	contLink, err := ip.LinkByName(contH, args.IfName)
	if err != nil {
		return fmt.Errorf("in %s: %w", contNS.Path(), err)
	}
	if err := waitOperUp(hostNS, contNS, hostLink.Attrs().Index, contLink.Attrs().Index); err != nil {
		return err
	}
	if err := p.after(StepHost); err != nil {
		return err
	}

	// Forwarding is namespace-wide and other attachments rely on it: it has
	// no undo.
	if err := ip.EnableForwarding(ipsOf(res)); err != nil {
		return fmt.Errorf("in %s: %w", hostNS.Path(), err)
	}
	if err := p.after(StepForwarding); err != nil {
		return err
	}

	if conf.IPMasq {
		owner := ownerOf(conf, args)
		masq, err := netfilter.NewMasq(conf.backend())
		if err != nil {
			return err
		}
		// A failed Setup leaves nothing (nftables: one batch; iptables:
		// undoes the families it made), so the undo follows success.
		if err := masq.Setup(owner, addrsOf(res)); err != nil {
			return fmt.Errorf("masquerade (%s) in %s: %w", masq.Backend(), hostNS.Path(), err)
		}
		undo.Push("tear down masquerade", func() error { return masq.Teardown(owner) })
	}
	if err := p.after(StepMasquerade); err != nil {
		return err
	}

	// Both ends are up now, so the announcement reaches the host end.
	if err := contNS.Do(func() error { return ip.AnnounceIPv4(contLink, ipsOf(res)) }); err != nil {
		// arp_notify announces the address too; a lost packet is no reason
		// to tear the attachment down.
		log.Warn("gratuitous arp failed", "err", err)
	}
	if err := p.after(StepAnnounce); err != nil {
		return err
	}

	out := buildResult(conf, args, res, hostLink, contLink)
	return result.Print(out, conf.CNIVersion)
}

// buildResult is upstream's shape: the host end, then the container end
// with its sandbox; every address on the container end; IPAM's routes; the
// config's DNS (IPAM's when the config has none).
func buildResult(conf *netConf, args *skel.CmdArgs, ipamRes *current.Result, hostLink, contLink netlink.Link) *current.Result {
	contIdx := 1
	out := &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{
			{Name: hostLink.Attrs().Name, Mac: hostLink.Attrs().HardwareAddr.String()},
			{Name: contLink.Attrs().Name, Mac: contLink.Attrs().HardwareAddr.String(), Sandbox: args.Netns},
		},
		Routes: ipamRes.Routes,
		DNS:    ipamRes.DNS,
	}
	for _, ipc := range ipamRes.IPs {
		c := *ipc
		c.Interface = &contIdx
		out.IPs = append(out.IPs, &c)
	}
	if !conf.DNS.IsEmpty() {
		out.DNS = conf.DNS
	}
	return out
}

func ipsOf(res *current.Result) []net.IP {
	var out []net.IP
	for _, ipc := range res.IPs {
		out = append(out, ipc.Address.IP)
	}
	return out
}

func addrsOf(res *current.Result) []*net.IPNet {
	var out []*net.IPNet
	for _, ipc := range res.IPs {
		out = append(out, &net.IPNet{IP: ipc.Address.IP, Mask: ipc.Address.Mask})
	}
	return out
}

func ownerOf(conf *netConf, args *skel.CmdArgs) netfilter.Owner {
	return netfilter.Owner{Network: conf.Name, ContainerID: args.ContainerID, IfName: args.IfName}
}
