package link

import (
	"fmt"
	"log/slog"
	"net"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ipam"
	"github.com/cniforge/plugins/pkg/ns"
)

// FinishOptions is the tail of an ADD that made a link in the container.
type FinishOptions struct {
	ContNS *ns.NetNS
	ContH  *netlink.Handle
	IfName string
	// Sandbox is CNI_NETNS as the runtime passed it, for the result.
	Sandbox string
	// IPAM is the IPAM result (or prevResult's addresses for a chained
	// plugin); nil or without addresses: layer 2 only, the link is just
	// brought up.
	IPAM *current.Result
	// DNS, when not empty, replaces IPAM's DNS in the result (the config's
	// "dns" key).
	DNS types.DNS
	// Down leaves the link down (host-device's userspace-driver case has
	// no link at all; tap keeps this false).
	Down bool
	Log  *slog.Logger
}

// Finish brings IfName in ContNS up with the IPAM addresses and routes and
// announces it, then returns the result: the one interface (name, MAC,
// sandbox), every IP pointing at it, IPAM's routes, DNS.
//
// IPv4 sets arp_notify, so the kernel announces the addresses with a
// gratuitous ARP each as the link comes up after them (and again when its
// MAC changes); a link that was up already (dhcp needed it) is announced
// from a packet socket instead. IPv6 sets ndisc_notify. Addresses carry
// IFA_F_NODAD: IPAM hands out unique addresses, and DAD would leave them
// unusable for 1-2 s. Changes are not
// undone here: deleting the link (the caller's undo) takes them along.
func Finish(o FinishOptions) (*current.Result, error) {
	res := &current.Result{CNIVersion: current.ImplementedSpecVersion}
	var v4 []net.IP
	var v6 bool
	zero := 0
	if o.IPAM != nil {
		for _, ipc := range o.IPAM.IPs {
			c := *ipc
			c.Interface = &zero
			res.IPs = append(res.IPs, &c)
			if ipc.Address.IP.To4() != nil {
				v4 = append(v4, ipc.Address.IP)
			} else {
				v6 = true
			}
		}
		res.Routes, res.DNS = o.IPAM.Routes, o.IPAM.DNS
	}
	if !o.DNS.IsEmpty() {
		res.DNS = o.DNS
	}
	if err := o.ContNS.Do(func() error {
		if len(v4) > 0 {
			if err := ip.SetArpNotify(o.IfName); err != nil {
				return err
			}
		}
		if v6 {
			return ip.SetSysctl(fmt.Sprintf("net/ipv6/conf/%s/ndisc_notify", o.IfName), "1")
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("in %s: %w", o.ContNS.Path(), err)
	}
	l, err := ip.LinkByName(o.ContH, o.IfName)
	if err != nil {
		return nil, fmt.Errorf("in %s: %w", o.ContNS.Path(), err)
	}
	res.Interfaces = []*current.Interface{{
		Name: o.IfName, Mac: l.Attrs().HardwareAddr.String(), Sandbox: o.Sandbox,
	}}
	if o.Down {
		return res, nil
	}
	// Addresses with an Interface index point at res.Interfaces[0] now,
	// so ConfigureIface (which brings the link up) takes all of them.
	if err := ipam.ConfigureIface(o.ContH, o.IfName, res, ipam.ConfigureOptions{}); err != nil {
		return nil, fmt.Errorf("configure %q in %s: %w", o.IfName, o.ContNS.Path(), err)
	}
	if len(v4) > 0 && l.Attrs().Flags&net.FlagUp != 0 {
		if err := o.ContNS.Do(func() error { return announceIPv4(l, v4) }); err != nil && o.Log != nil {
			// Best effort, as upstream: arp_notify announces too, and a
			// lost packet only delays neighbours until their cache expires.
			o.Log.Info("gratuitous arp failed", "err", err)
		}
	}
	return res, nil
}
