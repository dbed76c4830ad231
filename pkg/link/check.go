package link

import (
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ns"
)

// Want is what CHECK expects of a link in the container.
type Want struct {
	// Kind is the link type: "macvlan", "ipvlan", "vlan", "dummy", "tuntap".
	Kind string
	// Mode, when set, is the mode as Mode reports it ("bridge", "l3s",
	// "vlan 100", ...).
	Mode string
	// Master, when set, is the master link; the link's parent must be it.
	// Its index is compared, as the kernel reports the parent by index in
	// the master's namespace.
	Master netlink.Link
	// MTU, when not 0, is the link's MTU.
	MTU int
	// Iface is the link as prevResult reports it (name and MAC).
	Iface *current.Interface
	// IPs and Routes are prevResult's addresses on the link and its routes.
	IPs    []*current.IPConfig
	Routes []*types.Route
}

// Mode names the mode of a macvlan, macvtap or ipvlan link ("bridge",
// "private", "vepa", "passthru", "source"; "l2", "l3", "l3s") and the VLAN
// ID of a vlan link ("vlan 100"); "" for other links.
func Mode(l netlink.Link) string {
	switch v := l.(type) {
	case *netlink.Macvlan:
		return modeName(v.Mode, MacvlanModes, otherMacvlanModes)
	case *netlink.Macvtap:
		return modeName(v.Mode, MacvlanModes, otherMacvlanModes)
	case *netlink.IPVlan:
		return modeName(v.Mode, IPVlanModes)
	case *netlink.Vlan:
		return fmt.Sprintf("vlan %d", v.VlanId)
	}
	return ""
}

// Check compares the link prevResult names in contNS (h bound to it) with
// w: kind, up, mode, master, MTU, MAC, addresses and routes. It changes
// nothing; each error names the link and the namespace.
func Check(contNS *ns.NetNS, h *netlink.Handle, w Want) (netlink.Link, error) {
	name := w.Iface.Name
	l, err := attach.CheckLink(contNS, h, name, w.Kind, true)
	if err != nil {
		return nil, err
	}
	if w.Mode != "" {
		if have := Mode(l); have != w.Mode {
			return nil, fmt.Errorf("%q in %s is in mode %q, the config says %q", name, contNS.Path(), have, w.Mode)
		}
	}
	if w.Master != nil {
		if p := l.Attrs().ParentIndex; p != w.Master.Attrs().Index {
			return nil, fmt.Errorf("%q in %s has parent ifindex %d, not master %q (ifindex %d)", name, contNS.Path(), p, w.Master.Attrs().Name, w.Master.Attrs().Index)
		}
	}
	if w.MTU != 0 && l.Attrs().MTU != w.MTU {
		return nil, fmt.Errorf("%q in %s has MTU %d, the config says %d", name, contNS.Path(), l.Attrs().MTU, w.MTU)
	}
	if err := attach.CheckMAC(contNS, l, w.Iface.Mac); err != nil {
		return nil, err
	}
	if err := attach.CheckAddrs(contNS, h, l, w.IPs); err != nil {
		return nil, err
	}
	var routes []*types.Route
	for _, r := range w.Routes {
		// A route IPAM puts in a table of its own is not compared:
		// CheckRoutes looks in main and the source rules' tables.
		if r.Table == nil || *r.Table == 0 || *r.Table == 254 {
			routes = append(routes, r)
		}
	}
	if err := attach.CheckRoutes(contNS, h, l, routes); err != nil {
		return nil, err
	}
	return l, nil
}
