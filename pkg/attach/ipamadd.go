package attach

import (
	"context"
	"errors"
	"fmt"
	"net"

	current "github.com/containernetworking/cni/pkg/types/100"
)

// IPAM is the delegation of a config's "ipam" to the IPAM plugin it names
// (ADD, DEL, CHECK, GC, STATUS), for a plugin that takes its addresses from
// one: it passes pkg/ipam's Frame in Plugin.IPAM. The frame links no
// delegation itself (no exec, no invoke), so a plugin that takes no
// addresses (loopback, tuning, sbr, vrf, bandwidth, portmap, firewall)
// links none, and ignores an "ipam" key, as upstream's do.
type IPAM interface {
	// Find refuses (code 7) an IPAM type that is not in cniPath.
	Find(ipamType, cniPath string) error
	// Prestart starts verb's delegate before it is needed, so that its
	// process start overlaps the plugin's own steps, and returns ctx
	// carrying it for the delegation, the cancel to defer, and whether one
	// was started (see ipam.Prestart).
	Prestart(ctx context.Context, ipamType, verb string) (context.Context, func(), bool)
	Add(ctx context.Context, ipamType string, netconf []byte) (*current.Result, error)
	Del(ctx context.Context, ipamType string, netconf []byte) error
	Check(ctx context.Context, ipamType string, netconf []byte) error
	GC(ctx context.Context, ipamType string, netconf []byte) error
	Status(ctx context.Context, ipamType string, netconf []byte) error
}

// IPAMAdd runs the IPAM plugin's ADD, pushes the release onto a.Undo and
// validates the result before the plugin uses it: at least one address,
// and every entry complete (see ValidateIPAMResult).
func (a *Attachment) IPAMAdd() (*current.Result, error) {
	if a.ipam == nil {
		// A programming error every test of the plugin shows.
		return nil, errors.New("attach: IPAMAdd of a plugin without Plugin.IPAM")
	}
	ctx := context.TODO()
	addCtx := ctx
	if a.ipamCtx != nil {
		addCtx = a.ipamCtx
	}
	t, raw := a.Conf.IPAM.Type, a.Conf.Raw
	res, err := a.ipam.Add(addCtx, t, raw)
	if err != nil {
		return nil, err
	}
	a.Undo.Push("release ipam", func() error { return a.ipam.Del(ctx, t, raw) })
	if err := ValidateIPAMResult(t, res); err != nil {
		return nil, err
	}
	return res, nil
}

// ValidateIPAMResult refuses an IPAM result a plugin cannot wire: no
// address, an address without IP or prefix, a gateway or a route of the
// wrong shape, or an address pointing at an interface the result lacks.
func ValidateIPAMResult(ipamType string, res *current.Result) error {
	if res == nil || len(res.IPs) == 0 {
		return fmt.Errorf("ipam %s returned no addresses", ipamType)
	}
	for i, ipc := range res.IPs {
		if ipc == nil {
			return fmt.Errorf("ipam %s: ips[%d] is null", ipamType, i)
		}
		if err := validEntry("ips", i, "address", ipc.Address, ipc.Gateway); err != nil {
			return fmt.Errorf("ipam %s: %w", ipamType, err)
		}
		if ipc.Interface != nil && (*ipc.Interface < 0 || *ipc.Interface >= len(res.Interfaces)) && len(res.Interfaces) > 0 {
			return fmt.Errorf("ipam %s: ips[%d].interface: %d is not an index of interfaces", ipamType, i, *ipc.Interface)
		}
	}
	for i, r := range res.Routes {
		if r == nil {
			return fmt.Errorf("ipam %s: routes[%d] is null", ipamType, i)
		}
		if err := validEntry("routes", i, "dst", r.Dst, r.GW); err != nil {
			return fmt.Errorf("ipam %s: %w", ipamType, err)
		}
	}
	return nil
}

// validEntry checks entry i of list (ips, routes): its network n (under
// key) has an IP and a prefix of its family, and its gateway gw, when set,
// is of that family.
func validEntry(list string, i int, key string, n net.IPNet, gw net.IP) error {
	if err := validNet(n); err != nil {
		return fmt.Errorf("%s[%d].%s: %w", list, i, key, err)
	}
	if gw != nil && (gw.To4() != nil) != (n.IP.To4() != nil) {
		return fmt.Errorf("%s[%d]: gateway %s is not of the family of %s", list, i, gw, n.String())
	}
	return nil
}

// validNet checks that n has an IP and a prefix of its family.
func validNet(n net.IPNet) error {
	if n.IP == nil {
		return fmt.Errorf("missing")
	}
	ones, bits := n.Mask.Size()
	if n.Mask == nil || (ones == 0 && bits == 0) {
		return fmt.Errorf("%s has no prefix length", n.IP)
	}
	if want := 8 * len(familyIP(n.IP)); bits != want {
		return fmt.Errorf("%s has a /%d prefix of the other family", n.IP, ones)
	}
	return nil
}

func familyIP(ip net.IP) net.IP {
	if v4 := ip.To4(); v4 != nil {
		return v4
	}
	return ip.To16()
}
