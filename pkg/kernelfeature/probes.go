package kernelfeature

import (
	"errors"
	"fmt"
	"os"

	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

// The features kernel-dependent specs can Require.
var (
	// IPVlan: ipvlan links in l2 and l3 mode (the ipvlan plugin's modes).
	IPVlan = Feature{Name: "ipvlan", Tries: "creating ipvlan links (l2 and l3) on a veth", probe: probeIPVlan}
	// VLAN: 802.1Q vlan links (the vlan plugin).
	VLAN = Feature{Name: "802.1Q vlan", Tries: "creating a vlan link on a veth", probe: probeVLAN}
	// BridgeVLANFiltering: a bridge with vlan_filtering on and per-port
	// VLANs (bridge's vlan and vlanTrunk).
	BridgeVLANFiltering = Feature{Name: "bridge vlan_filtering", Tries: "creating a vlan_filtering bridge and adding vlan 10 to a port", probe: probeBridgeVLANFiltering}
	// Dummy: dummy links (the dummy plugin).
	Dummy = Feature{Name: "dummy", Tries: "creating a dummy link", probe: probeDummy}
	// VRF: vrf devices (the vrf plugin).
	VRF = Feature{Name: "vrf", Tries: "creating a vrf device", probe: probeVRF}
	// BrNetfilter: bridged IPv4 frames passing through iptables
	// (br_netfilter with net.bridge.bridge-nf-call-iptables), as on every
	// Kubernetes node; bridge's hairpinMode specs need it.
	BrNetfilter = Feature{Name: "br_netfilter", Tries: "reading net.bridge.bridge-nf-call-iptables in a namespace (the module is never loaded on demand)", probe: probeBrNetfilter}
)

// All is every feature the package probes.
var All = []Feature{IPVlan, VLAN, BridgeVLANFiltering, Dummy, VRF, BrNetfilter}

// prober is a throwaway namespace for one probe, with a handle in it, and
// a veth pair made on demand to serve as the parent of links that need one.
type prober struct {
	n *ns.NetNS
	h *netlink.Handle
}

func runProbe(f Feature) (err error) {
	n, cleanup, err := testutil.CreateNS()
	if err != nil {
		return fmt.Errorf("make a netns to probe in: %w", err)
	}
	defer func() {
		if cerr := cleanup(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("remove probe netns %s: %w", n.Path(), cerr))
		}
	}()
	h, err := n.Handle()
	if err != nil {
		return err
	}
	defer h.Close()
	return f.probe(&prober{n: n, h: h})
}

// parent makes a veth pair and returns one end.
func (p *prober) parent() (netlink.Link, error) {
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "probe0"}, PeerName: "probe1"}
	if err := p.h.LinkAdd(veth); err != nil {
		return nil, fmt.Errorf("add veth parent: %w", err)
	}
	return p.h.LinkByName("probe0")
}

// add creates l and reads it back, so a kernel that accepts an attribute
// but ignores it does not pass.
func (p *prober) add(l netlink.Link) (netlink.Link, error) {
	if err := p.h.LinkAdd(l); err != nil {
		return nil, fmt.Errorf("add %s %q: %w", l.Type(), l.Attrs().Name, err)
	}
	got, err := p.h.LinkByName(l.Attrs().Name)
	if err != nil {
		return nil, fmt.Errorf("read back %s %q: %w", l.Type(), l.Attrs().Name, err)
	}
	if got.Type() != l.Type() {
		return nil, fmt.Errorf("%q came back as %s, not %s", l.Attrs().Name, got.Type(), l.Type())
	}
	return got, nil
}

func probeIPVlan(p *prober) error {
	parent, err := p.parent()
	if err != nil {
		return err
	}
	for i, mode := range []netlink.IPVlanMode{netlink.IPVLAN_MODE_L2, netlink.IPVLAN_MODE_L3} {
		name := fmt.Sprintf("ipvl%d", i)
		got, err := p.add(&netlink.IPVlan{LinkAttrs: netlink.LinkAttrs{Name: name, ParentIndex: parent.Attrs().Index}, Mode: mode})
		if err != nil {
			return err
		}
		if m := got.(*netlink.IPVlan).Mode; m != mode {
			return fmt.Errorf("ipvlan %q has mode %d, asked for %d", name, m, mode)
		}
	}
	return nil
}

func probeVLAN(p *prober) error {
	parent, err := p.parent()
	if err != nil {
		return err
	}
	got, err := p.add(&netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Name: "vlan10", ParentIndex: parent.Attrs().Index}, VlanId: 10})
	if err != nil {
		return err
	}
	if id := got.(*netlink.Vlan).VlanId; id != 10 {
		return fmt.Errorf("vlan link has id %d, asked for 10", id)
	}
	return nil
}

func probeBridgeVLANFiltering(p *prober) error {
	on := true
	got, err := p.add(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "probebr"}, VlanFiltering: &on})
	if err != nil {
		return err
	}
	if vf := got.(*netlink.Bridge).VlanFiltering; vf == nil || !*vf {
		return errors.New("bridge came back without vlan_filtering")
	}
	port, err := p.parent()
	if err != nil {
		return err
	}
	if err := p.h.LinkSetMaster(port, got); err != nil {
		return fmt.Errorf("attach %q to the bridge: %w", port.Attrs().Name, err)
	}
	// A port VLAN (bridge vlan add) is what bridge's vlan/vlanTrunk use.
	if err := p.h.BridgeVlanAdd(port, 10, false, false, false, true); err != nil {
		return fmt.Errorf("add vlan 10 to bridge port %q: %w", port.Attrs().Name, err)
	}
	return nil
}

func probeDummy(p *prober) error {
	// Creating a dummy link where dummy.ko is not loaded makes the kernel
	// load it with its default numdummies=1, which creates "dummy0" in the
	// host's namespace: a test must never do that. Only probe a dummy that
	// is already there (built in, or loaded as the VM lane does, with
	// numdummies=0).
	if _, err := os.Stat("/sys/module/dummy"); err != nil {
		return fmt.Errorf("the dummy module is not loaded, and loading it on demand would create dummy0 in the host namespace: %w", err)
	}
	_, err := p.add(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "probedummy"}})
	return err
}

// probeBrNetfilter only reads the sysctl br_netfilter registers in every
// namespace: a sysctl read never loads a module, so a kernel where it is
// a module that nobody loaded answers "absent" (the VM lane preloads it).
func probeBrNetfilter(p *prober) error {
	return p.n.Do(func() error {
		_, err := os.ReadFile("/proc/sys/net/bridge/bridge-nf-call-iptables")
		return err
	})
}

func probeVRF(p *prober) error {
	got, err := p.add(&netlink.Vrf{LinkAttrs: netlink.LinkAttrs{Name: "probevrf"}, Table: 10})
	if err != nil {
		return err
	}
	if t := got.(*netlink.Vrf).Table; t != 10 {
		return fmt.Errorf("vrf has table %d, asked for 10", t)
	}
	return nil
}
