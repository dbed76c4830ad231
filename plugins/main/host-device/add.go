package hostdevice

import (
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ipam"
	"github.com/cniforge/plugins/pkg/ns"
)

// add moves the device in: resolve, IPAM, move, configure, announce. Each
// change pushes its undo as soon as it exists; the frame runs them in
// reverse on a failure.
func (p *hostDevice) add(a *attach.Attachment, c *config) (types.Result, error) {
	ifName := a.Args.IfName
	hostNS, hostH, err := a.Host()
	if err != nil {
		return nil, err
	}
	contNS, contH, err := a.Container()
	if err != nil {
		return nil, err
	}

	dev, userspace, err := p.resolve(hostNS, hostH, c.sel)
	if err != nil {
		return nil, err
	}
	if dev != nil {
		if _, err := ip.LinkByName(contH, ifName); err == nil {
			return nil, fmt.Errorf("a link %q already exists in %s", ifName, contNS.Path())
		} else if !errors.Is(err, ip.ErrLinkNotFound) {
			return nil, fmt.Errorf("in %s: %w", contNS.Path(), err)
		}
	}
	if err := a.Step(StepResolve); err != nil {
		return nil, err
	}

	var res *current.Result
	if c.HasIPAM() {
		if res, err = a.IPAMAdd(); err != nil {
			return nil, err
		}
	}
	if err := a.Step(StepIPAM); err != nil {
		return nil, err
	}

	if dev == nil {
		// A userspace driver owns the device: there is no link to move
		// or configure; the VMM or DPDK application uses the addresses.
		a.Log.Info("device bound to a userspace driver: no link moved", c.sel.key, c.sel.value, "driver", userspace)
		out := &current.Result{CNIVersion: current.ImplementedSpecVersion}
		if res != nil {
			out.IPs, out.Routes, out.DNS = res.IPs, res.Routes, res.DNS
		}
		if !c.DNS.IsEmpty() {
			out.DNS = c.DNS
		}
		return out, nil
	}

	link, err := moveIn(hostNS, hostH, contNS, contH, dev, ifName, &a.Undo)
	if err != nil {
		return nil, err
	}
	if err := a.Step(StepMove); err != nil {
		return nil, err
	}

	if err := configure(contNS, contH, ifName, res); err != nil {
		return nil, err
	}
	if err := a.Step(StepConfigure); err != nil {
		return nil, err
	}

	if res != nil {
		if err := contNS.Do(func() error { return ip.AnnounceIPv4(link, attach.IPs(res.IPs)) }); err != nil {
			// arp_notify announces the address too; a lost packet is no
			// reason to fail.
			a.Log.Warn("gratuitous arp failed", "err", err)
		}
	}
	if err := a.Step(StepAnnounce); err != nil {
		return nil, err
	}

	if link, err = ip.LinkByName(contH, ifName); err != nil {
		return nil, fmt.Errorf("in %s: %w", contNS.Path(), err)
	}
	return buildResult(c, a.Args.Netns, link, res), nil
}

// resolve finds the device in the host namespace, changing nothing. For a
// PCI device bound to a userspace driver it returns no link and the
// driver's name.
func (p *hostDevice) resolve(hostNS *ns.NetNS, hostH *netlink.Handle, s selector) (netlink.Link, string, error) {
	var names []string
	if s.key != keyDevice && s.key != keyHWAddr {
		d, err := readSysfs(p.sysfs, s)
		if err != nil {
			return nil, "", err
		}
		if d.userspaceDriver != "" {
			return nil, d.userspaceDriver, nil
		}
		names = d.names
	}
	dev, err := findDevice(hostNS, hostH, s, names)
	return dev, "", err
}

// configure sets arp_notify and ndisc_notify and, with IPAM, brings the
// device up with its addresses (no DAD wait: IPAM made them unique) and
// routes. Without IPAM the device keeps the up/down state it had in the
// host, as upstream does.
func configure(contNS *ns.NetNS, contH *netlink.Handle, ifName string, res *current.Result) error {
	if err := contNS.Do(func() error {
		if err := ip.SetArpNotify(ifName); err != nil {
			return err
		}
		// No IPv6 on the link (disabled) is not an error: nothing to notify.
		_ = ip.SetSysctl(fmt.Sprintf("net/ipv6/conf/%s/ndisc_notify", ifName), "1") // best effort: see above
		return nil
	}); err != nil {
		return fmt.Errorf("in %s: %w", contNS.Path(), err)
	}
	if res == nil {
		return nil
	}
	own := &current.Result{Routes: res.Routes}
	for _, ipc := range res.IPs {
		ipc := *ipc
		ipc.Interface = nil
		own.IPs = append(own.IPs, &ipc)
	}
	if err := ipam.ConfigureIface(contH, ifName, own, ipam.ConfigureOptions{}); err != nil {
		return fmt.Errorf("in %s: %w", contNS.Path(), err)
	}
	return nil
}

// buildResult is upstream's shape: the device with its sandbox and MAC,
// every address on it, IPAM's routes, the config's DNS (IPAM's when it has
// none).
func buildResult(c *config, sandbox string, link netlink.Link, ipamRes *current.Result) *current.Result {
	out := &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{{Name: link.Attrs().Name, Mac: link.Attrs().HardwareAddr.String(), Sandbox: sandbox}},
	}
	if ipamRes != nil {
		idx := 0
		for _, ipc := range ipamRes.IPs {
			ipc := *ipc
			ipc.Interface = &idx
			out.IPs = append(out.IPs, &ipc)
		}
		out.Routes = ipamRes.Routes
		out.DNS = ipamRes.DNS
	}
	if !c.DNS.IsEmpty() {
		out.DNS = c.DNS
	}
	return out
}
