package ptp

import (
	"fmt"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/attach/masquerade"
	"github.com/cniforge/plugins/pkg/ip"
)

// add wires the container: IPAM, veth pair, container end, host end,
// forwarding, masquerade, announcement. Each change pushes its undo as
// soon as it exists; the frame runs them in reverse on a failure.
func add(a *attach.Attachment, conf *netConf) (types.Result, error) {
	args := a.Args
	hostNS, hostH, err := a.Host()
	if err != nil {
		return nil, err
	}
	contNS, contH, err := a.Container()
	if err != nil {
		return nil, err
	}

	// IPAM runs before the veth exists, so a runtime's second ADD over a
	// live attachment is refused first: an IPAM that hands the attachment
	// its live address again (dhcp, static) would see ADD's undo release it.
	if err := ip.CheckNameFree(contNS, contH, args.IfName); err != nil {
		return nil, err
	}
	res, err := a.IPAMAdd()
	if err != nil {
		return nil, err
	}
	if err := validateIPAMResult(conf.IPAM.Type, res); err != nil {
		return nil, err
	}
	if err := a.Step(StepIPAM); err != nil {
		return nil, err
	}
	// Its process runs while the veth is made and configured.
	masqReady := func() error { return nil }
	if conf.IPMasq {
		masqReady = masquerade.Start(a, &conf.Masq, attach.Addrs(res.IPs))
	}

	hostName := hostVethName(conf.Name, args.ContainerID, args.IfName)
	hostLink, err := setupVeth(hostH, contH, contNS, hostName, args.IfName, a.Alias(), conf.MTU, hasV6(res))
	if err != nil {
		return nil, err
	}
	// Deleting one end deletes the pair, and with it every address and
	// route the next two steps put on either end.
	a.Undo.Push("delete veth "+hostName, func() error { return ip.DelLinkByName(hostH, hostName) })
	if err := a.Step(StepVeth); err != nil {
		return nil, err
	}

	if err := configureContainer(contNS, contH, args.IfName, res); err != nil {
		return nil, err
	}
	if err := a.Step(StepContainer); err != nil {
		return nil, err
	}
	if err := configureHost(hostH, hostNS.Path(), hostLink, res); err != nil {
		return nil, err
	}
	contLink, err := ip.LinkByName(contH, args.IfName)
	if err != nil {
		return nil, fmt.Errorf("in %s: %w", contNS.Path(), err)
	}
	if err := waitOperUp(hostNS, contNS, hostLink.Attrs().Index, contLink.Attrs().Index); err != nil {
		return nil, err
	}
	if err := a.Step(StepHost); err != nil {
		return nil, err
	}

	// Forwarding is namespace-wide and other attachments rely on it: it has
	// no undo.
	if err := ip.EnableForwarding(attach.IPs(res.IPs)); err != nil {
		return nil, fmt.Errorf("in %s: %w", hostNS.Path(), err)
	}
	if err := a.Step(StepForwarding); err != nil {
		return nil, err
	}

	if err := masqReady(); err != nil {
		return nil, fmt.Errorf("in %s: %w", hostNS.Path(), err)
	}
	if err := a.Step(StepMasquerade); err != nil {
		return nil, err
	}

	// Both ends are up now, so the announcement reaches the host end: the
	// kernel sends it (arp_notify) on a repeated MAC.
	if err := reannounce(contH, contLink, res); err != nil {
		// arp_notify announces the address too; a lost packet is no reason
		// to tear the attachment down.
		a.Log.Warn("gratuitous arp failed", "err", err)
	}
	if err := a.Step(StepAnnounce); err != nil {
		return nil, err
	}

	return buildResult(conf, args, res, hostLink, contLink), nil
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
