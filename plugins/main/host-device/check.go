package hostdevice

import (
	"fmt"

	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/cniforge/plugins/pkg/attach"
)

// check compares the kernel with prevResult after the frame ran IPAM's
// CHECK: the device is CNI_IFNAME in the container, carries its original
// name in its alias, has the MAC ADD reported, and (with IPAM) is up with
// the addresses and routes. A device bound to a userspace driver has no
// link to check. It changes nothing.
func (p *hostDevice) check(a *attach.Attachment, c *config, prev *current.Result) error {
	if c.sel.byPCI() {
		d, err := readSysfs(p.sysfs, c.sel)
		if err != nil {
			return err
		}
		if d.userspaceDriver != "" {
			return nil
		}
	}
	t, err := a.CheckTarget(prev)
	if err != nil {
		return err
	}
	contNS, contH, name := t.NS, t.H, a.Args.IfName
	l, err := attach.CheckLink(contNS, contH, name, "", c.HasIPAM())
	if err != nil {
		return err
	}
	if l.Attrs().Alias == "" {
		return fmt.Errorf("%q in %s has no alias: the name to return it under on DEL is lost", name, contNS.Path())
	}
	if err := attach.CheckMAC(contNS, l, t.Iface.Mac); err != nil {
		return err
	}
	if err := attach.CheckAddrs(contNS, contH, l, t.IPs); err != nil {
		return err
	}
	return attach.CheckRoutes(contNS, contH, l, prev.Routes)
}
