package hostdevice

import (
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/link"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/result"
)

// add moves the device in: resolve, move, up and IPAM, then the shared tail. Each
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

	for _, u := range c.unused {
		a.Log.Info("several ways to pick the device: "+c.sel.key+" takes precedence, as upstream's", "used", c.sel.value, "unused", u.key, "value", u.value)
	}
	dev, userspace, err := p.resolve(hostNS, hostH, c.sel)
	if err != nil {
		return nil, err
	}
	if dev != nil {
		if err := ip.CheckNameFree(contNS, contH, ifName); err != nil {
			return nil, err
		}
	}
	if err := a.Step(StepResolve); err != nil {
		return nil, err
	}

	if dev == nil {
		// A userspace driver owns the device: there is no link to move
		// or configure; the VMM or DPDK application uses the addresses.
		var res *current.Result
		if c.HasIPAM() {
			if res, err = a.IPAMAdd(); err != nil {
				return nil, err
			}
		}
		if err := a.Step(StepIPAM); err != nil {
			return nil, err
		}
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

	tmp := tempName(a.Args.ContainerID, ifName)
	if _, err := moveIn(hostNS, hostH, contNS, contH, dev, ifName, tmp, &a.Undo); err != nil {
		return nil, err
	}
	if err := a.Step(StepMove); err != nil {
		return nil, err
	}

	// IPAM after the move, as upstream, with the device up: an IPAM
	// plugin working on the interface (dhcp) finds it in the container.
	// Then the tail: notify sysctls, up, addresses (no DAD wait) and
	// routes, a gratuitous ARP, the result. Without IPAM the device comes
	// up too, as upstream brings it up, even one that was down in the host
	// (issue 22, defect 4).
	var addrs func() (*current.Result, error)
	if c.HasIPAM() {
		addrs = func() (*current.Result, error) {
			l, err := ip.LinkByName(contH, ifName)
			if err != nil {
				return nil, fmt.Errorf("in %s: %w", contNS.Path(), err)
			}
			if err := contH.LinkSetUp(l); err != nil {
				return nil, fmt.Errorf("set %q up in %s: %w", ifName, contNS.Path(), err)
			}
			return a.IPAMAdd()
		}
	}
	return link.Configure(a, addrs, c.DNS)
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
	if err != nil {
		return nil, "", err
	}
	if dev.Attrs().Flags&net.FlagLoopback != 0 {
		// The kernel keeps a loopback in its namespace (NETIF_F_NETNS_LOCAL);
		// say so before anything is renamed.
		return nil, "", result.InvalidConfig(fmt.Errorf("%s: %q: %q is the loopback device of %s, which cannot move", s.key, s.value, dev.Attrs().Name, hostNS.Path()))
	}
	return dev, "", nil
}
