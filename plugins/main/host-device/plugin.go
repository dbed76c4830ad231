// Package hostdevice is the host-device plugin: it moves an existing
// network device of the host (a physical NIC, an SR-IOV VF, an auxiliary
// device, any link) into the container under CNI_IFNAME, and back on DEL.
//
// The device is picked by exactly one of device (its name), hwaddr,
// kernelpath (its /sys/devices path), pciBusID, or runtimeConfig.deviceID
// (capability "deviceID": a PCI address or an auxiliary-bus device). A PCI
// device bound to a userspace driver (vfio-pci, uio) has no netdev: ADD
// then only runs IPAM and returns its result, touching no link.
//
// It runs on the frame in pkg/attach. ADD, in order (each step pushes its
// undo; a failure or panic runs them in reverse, IPAM release included):
//
//	resolve     find the device in the host namespace (through sysfs for
//	            kernelpath, pciBusID and deviceID), changing nothing;
//	            CNI_IFNAME must be free in the container
//	move        down, its original name kept in the link alias (as
//	            upstream keeps it), renamed to the attachment's temporary
//	            name, moved into the container, renamed to CNI_IFNAME
//	ipam        with ipam.type set: the device up in the container, then
//	            IPAM ADD (upstream's order; dhcp leases on the interface)
//	configure   the device up (as upstream, even one that was down in
//	            the host); with IPAM: arp_notify/ndisc_notify, addresses
//	            and routes, a gratuitous ARP (pkg/link's Finish)
//
// DEL moves the device back under the name its alias holds, through the
// temporary name, so that a name the container also uses never collides.
// The temporary name ("hd" + a hash of container ID and ifname) is the
// attachment's own: a DEL after an ADD or DEL killed midway finds the
// device under it in either namespace, and no other DEL touches it.
// It succeeds when the device or the namespace is gone and when run twice.
// When the namespace died, the kernel destroyed a virtual device, or gave
// a physical one back to the root namespace under its container name; DEL
// leaves that one as it is (see del). GC and STATUS are the frame's: they
// go to IPAM.
package hostdevice

import (
	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ipam"
	"github.com/cniforge/plugins/pkg/link"
	"github.com/cniforge/plugins/pkg/plugin"
)

// The steps of ADD, in order, as passed to attach.Hooks.AfterStep.
const (
	StepResolve   = "resolve"          // the device found, nothing changed
	StepMove      = "move"             // the device is CNI_IFNAME in the container
	StepIPAM      = link.StepIPAM      // the device up, IPAM reserved the addresses (when configured)
	StepConfigure = link.StepConfigure // up, with addresses and routes, announced
)

// AddSteps lists the steps of ADD in the order they run.
var AddSteps = []string{StepResolve, StepMove, StepIPAM, StepConfigure}

// New returns the host-device plugin's descriptor running with hooks,
// reading sysfs at sysfsRoot ("/sys"; tests pass a tree of their own).
func New(hooks attach.Hooks, sysfsRoot string) plugin.Plugin {
	p := &hostDevice{sysfs: sysfsRoot}
	return attach.Plugin[*config]{
		Name:    "host-device",
		Summary: "moves a host network device into the container",
		IPAM:    ipam.Frame{},
		Parse:   parse,
		Add:     p.add,
		// DEL finds the device by CNI_IFNAME and the attachment's
		// temporary name, IPAM by ipam: a config edited since ADD that no
		// longer validates does not stop it.
		Lenient: attach.DecodeOnly[config],
		Del:     p.del,
		Check:   p.check,
	}.Descriptor(hooks)
}

type hostDevice struct {
	sysfs string // root of the sysfs tree
}

// Plugin is the host-device plugin's descriptor.
var Plugin = New(attach.Hooks{}, "/sys")
