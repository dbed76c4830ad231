package link

import (
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ipam"
)

// The steps Add passes to attach.Hooks.AfterStep, in the order they run.
const (
	StepLink      = "link"      // the link exists in the container as CNI_IFNAME, up
	StepIPAM      = "ipam"      // IPAM reserved the addresses (or prevResult's, or none)
	StepConfigure = "configure" // addresses, routes, announcement
)

// AddSteps lists Add's steps in the order they run.
var AddSteps = []string{StepLink, StepIPAM, StepConfigure}

// AddOptions is what Add needs besides the link.
type AddOptions struct {
	// Master is where the link is made (its namespace); nil: in the
	// container itself (dummy).
	Master *Master
	// Addrs returns the addresses for the link, run once the link is up
	// in the container: a.IPAMAdd, or prevResult for a chained plugin. Nil
	// or returning nil: layer 2 only.
	Addrs func() (*current.Result, error)
	// DNS, when not empty, replaces IPAM's DNS in the result.
	DNS types.DNS
	// CreateErr, when set, rewrites an error of Create (vlan names the
	// VLAN ID already in use on EEXIST); master is Master.
	CreateErr func(err error, master *Master) error
}

// Add is the ADD of a plugin whose link is not a veth, in upstream's order:
// Create (temporary name in the master's namespace, move, rename), push
// its undo, Step(link), then the addresses, Step(ipam), then Finish
// (addresses, up, routes, announce, result), Step(configure). l carries
// its LinkAttrs but for the name; ParentIndex is set from opts.Master.
// Runs in no namespace of its own.
//
// The link comes up before IPAM runs when the IPAM plugin may need it (the
// dhcp daemon acquires its lease on CNI_IFNAME in the container; see
// ipam.UsesLink). Otherwise Finish brings it up after its addresses, so
// that the kernel announces them as it does (arp_notify) and no packet
// socket is needed.
func Add(a *attach.Attachment, l netlink.Link, opts AddOptions) (types.Result, error) {
	contNS, contH, err := a.Container()
	if err != nil {
		return nil, err
	}
	co := CreateOptions{
		MasterNS: contNS, MasterH: contH, ContNS: contNS, ContH: contH,
		IfName: a.Args.IfName, Alias: a.Alias(),
	}
	if opts.Master != nil {
		co.MasterNS, co.MasterH = opts.Master.NS, opts.Master.H
		l.Attrs().ParentIndex = opts.Master.Link.Attrs().Index
	}
	made, err := Create(l, co)
	if err != nil {
		if opts.CreateErr != nil {
			err = opts.CreateErr(err, opts.Master)
		}
		return nil, err
	}
	ifName := a.Args.IfName
	a.Undo.Push("delete "+l.Type()+" "+ifName, func() error { return ip.DelLinkByName(contH, ifName) })
	if ipam.UsesLink(a.Conf.IPAM.Type) {
		if err := contH.LinkSetUp(made); err != nil {
			return nil, fmt.Errorf("set %q up in %s: %w", ifName, contNS.Path(), err)
		}
	}
	if err := a.Step(StepLink); err != nil {
		return nil, err
	}
	return Configure(a, opts.Addrs, opts.DNS)
}

// AddOnMaster is the ADD of macvlan, ipvlan and vlan: the master called
// name ("" for the default route's) resolved where the keys say
// (ResolveMasterOf, which refuses the keys' MTU above the master's), then
// Add of l on it with that MTU, taking IPAM's addresses when layer3 and
// opts.Addrs otherwise. l carries its other LinkAttrs (a MAC, say).
func (k Keys) AddOnMaster(a *attach.Attachment, name string, l netlink.Link, layer3 bool, opts AddOptions) (types.Result, error) {
	m, err := ResolveMasterOf(a, k.LinkInContainer, name, k.MTU)
	if err != nil {
		return nil, err
	}
	l.Attrs().MTU = k.MTU
	opts.Master = m
	if layer3 {
		opts.Addrs = a.IPAMAdd
	}
	return Add(a, l, opts)
}

// Configure is the tail of ADD once the link is CNI_IFNAME in the
// container: the addresses from addrs (IPAM, or prevResult for a chained
// plugin; nil or returning nil: layer 2 only), Step(StepIPAM), then Finish
// (addresses, up, routes, announce, result; dns, when not empty, replaces
// IPAM's), Step(StepConfigure). Add ends in it, and so do tap's and
// host-device's ADD. Runs in no namespace of its own.
func Configure(a *attach.Attachment, addrs func() (*current.Result, error), dns types.DNS) (types.Result, error) {
	contNS, contH, err := a.Container()
	if err != nil {
		return nil, err
	}
	var res *current.Result
	if addrs != nil {
		if res, err = addrs(); err != nil {
			return nil, err
		}
	}
	if err := a.Step(StepIPAM); err != nil {
		return nil, err
	}
	out, err := Finish(FinishOptions{
		ContNS: contNS, ContH: contH, IfName: a.Args.IfName, Sandbox: a.Args.Netns,
		IPAM: res, DNS: dns, Log: a.Log,
	})
	if err != nil {
		return nil, err
	}
	if err := a.Step(StepConfigure); err != nil {
		return nil, err
	}
	return out, nil
}

// MasterRef names a master as the config does: Name ("" for the default
// route's interface), in the container's namespace with InContainer.
type MasterRef struct {
	InContainer bool
	Name        string
}

// CheckAttachment is the CHECK of a plugin whose link is not a veth: the
// container interface prevResult names, compared with w (Kind, Mode, MTU
// set by the caller; Iface, IPs and Routes filled in from prev) and, when
// master is not nil, with the master resolved as ADD does. Read-only.
func CheckAttachment(a *attach.Attachment, prev *current.Result, master *MasterRef, w Want) error {
	t, err := a.CheckTarget(prev)
	if err != nil {
		return err
	}
	w.Iface, w.IPs, w.Routes = t.Iface, t.IPs, prev.Routes
	if master != nil {
		m, err := ResolveMasterOf(a, master.InContainer, master.Name, w.MTU)
		if err != nil {
			return err
		}
		w.Master = m.Link
	}
	_, err = Check(t.NS, t.H, w)
	return err
}
