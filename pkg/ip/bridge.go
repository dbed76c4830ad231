package ip

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ErrNotBridge is returned (wrapped) when a link expected to be a bridge is
// something else.
var ErrNotBridge = errors.New("not a bridge")

// BridgeOptions describes a bridge EnsureBridge creates or accepts.
type BridgeOptions struct {
	Name string
	// MTU applies only when the bridge is created; an existing bridge keeps
	// its MTU (other ports depend on it).
	MTU int
	// VlanFiltering turns on 802.1Q filtering. An existing bridge without it
	// is refused rather than switched: flipping it changes what every other
	// port of the bridge can reach.
	VlanFiltering bool
	// Promisc puts the bridge in promiscuous mode.
	Promisc bool
}

// EnsureBridge returns the bridge opts.Name in h's namespace, up, creating
// it when missing; created says whether this call made it. A link of that
// name that is not a bridge yields an error wrapping ErrNotBridge.
func EnsureBridge(h *netlink.Handle, opts BridgeOptions) (br *netlink.Bridge, created bool, err error) {
	br, err = BridgeByName(h, opts.Name)
	if errors.Is(err, ErrLinkNotFound) {
		la := netlink.NewLinkAttrs()
		la.Name = opts.Name
		la.MTU = opts.MTU
		// -1 leaves the queue length at the kernel default; 0 would mean
		// "no queue" for a bridge created with an explicit TxQLen.
		la.TxQLen = -1
		nb := &netlink.Bridge{LinkAttrs: la}
		if opts.VlanFiltering {
			on := true
			nb.VlanFiltering = &on
		}
		err = h.LinkAdd(nb)
		switch {
		case err == nil:
			created = true
		case errors.Is(err, unix.EEXIST):
			// Another ADD made it between the lookup and now: use theirs.
		default:
			return nil, false, fmt.Errorf("create bridge %q: %w", opts.Name, err)
		}
		br, err = BridgeByName(h, opts.Name)
	}
	if err != nil {
		return nil, false, err
	}
	undo := func(err error) (*netlink.Bridge, bool, error) {
		if created {
			_ = h.LinkDel(br) // best effort: the error being returned matters more
		}
		return nil, false, err
	}
	if opts.VlanFiltering && (br.VlanFiltering == nil || !*br.VlanFiltering) {
		return undo(fmt.Errorf("bridge %q has vlan_filtering off; vlan settings need it on", opts.Name))
	}
	if opts.Promisc && br.Attrs().Promisc == 0 {
		if err := h.SetPromiscOn(br); err != nil {
			return undo(fmt.Errorf("set bridge %q promiscuous: %w", opts.Name, err))
		}
	}
	if br.Attrs().Flags&unix.IFF_UP == 0 {
		if err := h.LinkSetUp(br); err != nil {
			return undo(fmt.Errorf("set bridge %q up: %w", opts.Name, err))
		}
	}
	return br, created, nil
}

// BridgeByName looks up a bridge; a missing link wraps ErrLinkNotFound, a
// link of another type wraps ErrNotBridge.
func BridgeByName(h *netlink.Handle, name string) (*netlink.Bridge, error) {
	l, err := LinkByName(h, name)
	if err != nil {
		return nil, err
	}
	br, ok := l.(*netlink.Bridge)
	if !ok {
		return nil, fmt.Errorf("link %q is a %s: %w", name, l.Type(), ErrNotBridge)
	}
	return br, nil
}

// Ports returns the links enslaved to the master (a bridge, a VRF) with
// ifindex masterIndex.
func Ports(h *netlink.Handle, masterIndex int) ([]netlink.Link, error) {
	links, err := LinkList(h)
	if err != nil {
		return nil, err
	}
	var ports []netlink.Link
	for _, l := range links {
		if l.Attrs().MasterIndex == masterIndex {
			ports = append(ports, l)
		}
	}
	return ports, nil
}

// DelMasterIfUnused deletes master (a bridge, a VRF) unless a link is still
// enslaved to it: another attachment may have joined it. A master already
// gone is success.
func DelMasterIfUnused(h *netlink.Handle, master netlink.Link) error {
	ports, err := Ports(h, master.Attrs().Index)
	if err != nil {
		return err
	}
	if len(ports) > 0 {
		return nil
	}
	return DelLinkByName(h, master.Attrs().Name)
}

// PortOptions are the bridge-port settings of one link.
type PortOptions struct {
	Hairpin  bool // reflect frames back out of the port they came in on
	Isolated bool // no traffic with other isolated ports
	// Vlan is the port's untagged PVID (0: none).
	Vlan int
	// Trunk lists tagged VLAN ranges [min, max] allowed on the port.
	Trunk [][2]int
	// KeepDefaultVlan keeps the bridge's default VLAN (1) on the port; only
	// meaningful with vlan filtering.
	KeepDefaultVlan bool
}

// AttachPort enslaves link to br and applies opts. VLAN settings need a
// bridge with vlan filtering on.
func AttachPort(h *netlink.Handle, br *netlink.Bridge, link netlink.Link, opts PortOptions) error {
	name := link.Attrs().Name
	if err := h.LinkSetMaster(link, br); err != nil {
		return fmt.Errorf("attach %q to bridge %q: %w", name, br.Attrs().Name, err)
	}
	if opts.Hairpin {
		if err := h.LinkSetHairpin(link, true); err != nil {
			return fmt.Errorf("set hairpin on %q: %w", name, err)
		}
	}
	if opts.Isolated {
		if err := h.LinkSetIsolated(link, true); err != nil {
			return fmt.Errorf("set isolated on %q: %w", name, err)
		}
	}
	vlanAware := opts.Vlan != 0 || len(opts.Trunk) > 0
	if vlanAware && !opts.KeepDefaultVlan {
		// The kernel puts every new port in VLAN 1 (pvid, untagged); a port
		// meant for other VLANs must not leak into it.
		if err := h.BridgeVlanDel(link, 1, true, true, false, true); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("remove default vlan 1 from %q: %w", name, err)
		}
	}
	for _, r := range opts.Trunk {
		var err error
		if r[0] == r[1] {
			// The kernel refuses a range whose ends are equal.
			err = h.BridgeVlanAdd(link, uint16(r[0]), false, false, false, true)
		} else {
			err = h.BridgeVlanAddRange(link, uint16(r[0]), uint16(r[1]), false, false, false, true)
		}
		if err != nil {
			return fmt.Errorf("add trunk vlans %d-%d to %q: %w", r[0], r[1], name, err)
		}
	}
	if opts.Vlan != 0 {
		if err := h.BridgeVlanAdd(link, uint16(opts.Vlan), true, true, false, true); err != nil {
			return fmt.Errorf("add vlan %d (pvid, untagged) to %q: %w", opts.Vlan, name, err)
		}
	}
	return nil
}
