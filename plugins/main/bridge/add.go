package bridge

import (
	"log/slog"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/attach/masquerade"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/result"
	"github.com/cniforge/plugins/pkg/rollback"
)

// attachment is what one command works on: the frame's attachment, the
// parsed config, the two namespaces and netlink handles bound to them.
type attachment struct {
	*attach.Attachment
	conf   *config
	args   *skel.CmdArgs
	log    *slog.Logger
	hostNS *ns.NetNS
	hostH  *netlink.Handle
	contNS *ns.NetNS // nil unless the command opened it (ADD, CHECK)
	contH  *netlink.Handle
	// ownPorts are the ifindexes of bridge ports this ADD created, so an
	// undo can tell whether anyone else uses the bridge.
	ownPorts map[int]bool
}

// wrap opens the host namespace and, with container set, the container
// namespace (behind the frame's own-namespace guard).
func wrap(fa *attach.Attachment, conf *config, container bool) (*attachment, error) {
	a := &attachment{Attachment: fa, conf: conf, args: fa.Args, log: fa.Log, ownPorts: map[int]bool{}}
	var err error
	if a.hostNS, a.hostH, err = fa.Host(); err != nil {
		return nil, err
	}
	if container {
		if a.contNS, a.contH, err = fa.Container(); err != nil {
			return nil, err
		}
	}
	return a, nil
}

func add(fa *attach.Attachment, conf *config) (types.Result, error) {
	a, err := wrap(fa, conf, true)
	if err != nil {
		return nil, err
	}
	return a.add(&fa.Undo)
}

// add runs the ADD steps, pushing the undo of each onto undo. The order is
// upstream's: the container interface exists, is on the bridge and is up
// before IPAM runs, because an IPAM plugin may talk on it (dhcp acquires
// its lease on the container interface, inside the container namespace).
func (a *attachment) add(undo *rollback.Stack) (*current.Result, error) {
	conf, args := a.conf, a.args
	// Its process (iptables-nft: the restore) starts now and waits for
	// the addresses while the links are made and IPAM runs.
	var masq *masquerade.Prepared
	if conf.IPMasq {
		masq = masquerade.Prepare(a.Attachment, &conf.Masq)
		defer masq.Release()
	}

	br, err := a.ensureBridge(undo)
	if err != nil {
		return nil, err
	}
	if err := a.Step("bridge"); err != nil {
		return nil, err
	}

	hostVeth, contLink, err := a.setupVeth(undo)
	if err != nil {
		return nil, err
	}
	if err := a.Step("veth"); err != nil {
		return nil, err
	}

	if err := a.attachPort(br, hostVeth, contLink); err != nil {
		return nil, err
	}
	if err := a.Step("port"); err != nil {
		return nil, err
	}

	// Before IPAM: until the host end is operationally up its queue drops
	// frames, a DHCP discover among them (the client would only resend it
	// seconds later).
	if hostVeth, err = a.waitPort(hostVeth, portTimeout); err != nil {
		return nil, err
	}
	if err := a.Step("wait"); err != nil {
		return nil, err
	}

	res := &current.Result{CNIVersion: current.ImplementedSpecVersion}
	if conf.layer3 {
		ipamRes, err := a.IPAMAdd() // validated; release pushed onto undo
		if err != nil {
			return nil, err
		}
		res.IPs, res.Routes, res.DNS = ipamRes.IPs, ipamRes.Routes, ipamRes.DNS
	}
	// Refuse a result the gateway settings cannot work with before any of
	// it reaches the kernel (pure: it only fills in gateways and default
	// routes).
	gws, err := applyGateways(conf, res)
	if err != nil {
		return nil, result.InvalidConfig(err)
	}
	if err := a.Step("ipam"); err != nil {
		return nil, err
	}
	// Its process runs while the container and the gateway are configured.
	masqReady := func() error { return nil }
	if conf.IPMasq && len(res.IPs) > 0 {
		masqReady = masq.Start(attach.Addrs(res.IPs))
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
	if err := a.Step("container"); err != nil {
		return nil, err
	}

	if conf.IsGateway && len(gws) > 0 {
		if err := a.ensureGateway(br, gws, undo); err != nil {
			return nil, err
		}
	}
	if err := a.Step("gateway"); err != nil {
		return nil, err
	}

	if (conf.IsGateway || conf.IPMasq) && len(res.IPs) > 0 {
		// The plugin's thread is in the host namespace (see pkg/ns).
		if err := ip.EnableForwarding(attach.IPs(res.IPs)); err != nil {
			return nil, err
		}
	}
	if err := a.Step("forwarding"); err != nil {
		return nil, err
	}

	if err := masqReady(); err != nil {
		return nil, err
	}
	if err := a.Step("masquerade"); err != nil {
		return nil, err
	}

	if conf.MacSpoofChk {
		if err := a.setupMacSpoofCheck(hostVeth, contLink.Attrs().HardwareAddr, undo); err != nil {
			return nil, err
		}
	}
	if err := a.Step("macspoof"); err != nil {
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
