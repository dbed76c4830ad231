package attach

import (
	"context"
	"fmt"
	"net"

	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/cniforge/plugins/pkg/ipam"
)

// IPAMAdd runs the IPAM plugin's ADD, pushes the release onto a.Undo and
// validates the result before the plugin uses it: at least one address,
// and every entry complete (see ValidateIPAMResult).
func (a *Attachment) IPAMAdd() (*current.Result, error) {
	ctx := context.TODO()
	t, raw := a.Conf.IPAM.Type, a.Conf.Raw
	res, err := ipam.Add(ipam.WithPrestarted(ctx, a.ipamPre), t, raw)
	if err != nil {
		return nil, err
	}
	a.Undo.Push("release ipam", func() error { return ipam.Del(ctx, t, raw) })
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
		if err := validNet(ipc.Address); err != nil {
			return fmt.Errorf("ipam %s: ips[%d].address: %w", ipamType, i, err)
		}
		if ipc.Gateway != nil && (ipc.Gateway.To4() != nil) != (ipc.Address.IP.To4() != nil) {
			return fmt.Errorf("ipam %s: ips[%d]: gateway %s is not of the family of %s", ipamType, i, ipc.Gateway, ipc.Address.String())
		}
		if ipc.Interface != nil && (*ipc.Interface < 0 || *ipc.Interface >= len(res.Interfaces)) && len(res.Interfaces) > 0 {
			return fmt.Errorf("ipam %s: ips[%d].interface: %d is not an index of interfaces", ipamType, i, *ipc.Interface)
		}
	}
	for i, r := range res.Routes {
		if r == nil {
			return fmt.Errorf("ipam %s: routes[%d] is null", ipamType, i)
		}
		if err := validNet(r.Dst); err != nil {
			return fmt.Errorf("ipam %s: routes[%d].dst: %w", ipamType, i, err)
		}
		if r.GW != nil && (r.GW.To4() != nil) != (r.Dst.IP.To4() != nil) {
			return fmt.Errorf("ipam %s: routes[%d]: gateway %s is not of the family of %s", ipamType, i, r.GW, r.Dst.String())
		}
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
