package bandwidth

import (
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/result"
)

// plan is what ADD will make, resolved before any change.
type plan struct {
	host            netlink.Link // the host end of the container's veth
	ingress, egress *tbfParams   // nil: no limit that way
	// what upstream's ADD installs for the same limits (CHECK accepts it)
	upIngress, upEgress tbfParams
	ifbName, ifAlias    string
	clamped             []clamp // bursts cut to what tbf can hold
}

func add(a *attach.Attachment, c *netConf) (types.Result, error) {
	res := a.Prev
	if c.runtimeIgnored {
		a.Log.Info("runtimeConfig.bandwidth unused: the config's top-level rate and burst keys take precedence, as upstream's")
	}
	if c.bw.isZero() {
		return res, nil
	}
	p, err := resolve(a, c, res)
	if err != nil {
		return nil, err
	}
	for _, cl := range p.clamped {
		a.Log.Warn("burst clamped to the largest tbf can hold at the rate", "key", cl.key,
			"bits", cl.asked, "rate", cl.rate, "installed", cl.installed)
	}
	hostNS, h, err := a.Host()
	if err != nil {
		return nil, err
	}
	hostName := p.host.Attrs().Name

	if p.ingress != nil {
		where := fmt.Sprintf("%q (the host end of %q in %s)", hostName, a.Args.IfName, a.Args.Netns)
		undo, err := ensureRootTbf(h, p.host, *p.ingress, p.upIngress, where)
		if err != nil {
			return nil, err
		}
		if undo != nil {
			a.Undo.Push("undo the tbf of "+hostName, undo)
		}
	}
	if err := a.Step(StepIngress); err != nil {
		return nil, err
	}
	if p.egress == nil {
		return res, nil
	}

	ifb, made, err := ensureIfb(h, p.ifbName, p.ifAlias, IfbGroup(c.Name), p.host.Attrs().MTU)
	if err != nil {
		return nil, err
	}
	if made {
		a.Undo.Push("delete ifb "+p.ifbName, func() error { return ip.DelLinkByName(h, p.ifbName) })
	}
	if err := a.Step(StepIfb); err != nil {
		return nil, err
	}

	if err := ensureRedirect(a, h, p.host, ifb); err != nil {
		return nil, err
	}
	if err := a.Step(StepRedirect); err != nil {
		return nil, err
	}

	undo, err := ensureRootTbf(h, ifb, *p.egress, p.upEgress, fmt.Sprintf("%q in %s", p.ifbName, hostNS.Path()))
	if err != nil {
		return nil, err
	}
	if undo != nil {
		a.Undo.Push("undo the tbf of "+p.ifbName, undo)
	}
	if err := a.Step(StepEgress); err != nil {
		return nil, err
	}
	mac := ifb.Attrs().HardwareAddr.String()
	// An ADD over a live attachment may get the result of the one before
	// as prevResult: the ifb is listed once.
	if i := result.InterfaceIndex(res, p.ifbName, ""); i >= 0 {
		res.Interfaces[i].Mac = mac
	} else {
		res.Interfaces = append(res.Interfaces, &current.Interface{Name: p.ifbName, Mac: mac})
	}
	return res, nil
}

// resolve finds the host end and computes the tbf parameters, changing
// nothing. A burst tbf cannot hold is clamped (tbfFor); ADD logs it.
func resolve(a *attach.Attachment, c *netConf, res *current.Result) (*plan, error) {
	p := &plan{ifbName: IfbName(c.Name, a.Args.ContainerID), ifAlias: ifbAlias(c.Name, a.Args.ContainerID)}
	tick := netlink.TickInUsec()
	for _, d := range []struct {
		dir         string
		rate, burst uint64
		to          **tbfParams
		up          *tbfParams
	}{
		{"ingress", c.bw.IngressRate, c.bw.IngressBurst, &p.ingress, &p.upIngress},
		{"egress", c.bw.EgressRate, c.bw.EgressBurst, &p.egress, &p.upEgress},
	} {
		if d.rate == 0 {
			continue
		}
		t, burst, clamped := tbfFor(d.rate, d.burst, tick)
		*d.to = &t
		*d.up = upstreamTbf(d.rate, d.burst, tick)
		if clamped {
			p.clamped = append(p.clamped, clamp{key: prefix(c) + d.dir + "Burst", asked: d.burst, rate: d.rate, installed: burst})
		}
	}
	host, err := hostEnd(a, res)
	if err != nil {
		return nil, err
	}
	p.host = host
	return p, nil
}

// clamp is a burst tbf cannot hold at its rate, and the one installed.
type clamp struct {
	key                    string
	asked, rate, installed uint64
}

func prefix(c *netConf) string {
	if c.bw == c.RuntimeConfig.Bandwidth {
		return "runtimeConfig.bandwidth."
	}
	return ""
}

// hostEnd is the host end of CNI_IFNAME's veth: its peer, which res must
// list as a host interface (upstream's rule). An interface that is not a
// veth (macvlan, ipvlan) has no host end to shape: code 7.
func hostEnd(a *attach.Attachment, res *current.Result) (netlink.Link, error) {
	contNS, contH, err := a.Container()
	if err != nil {
		return nil, err
	}
	cl, err := ip.LinkByName(contH, a.Args.IfName)
	if err != nil {
		return nil, fmt.Errorf("in %s: %w", contNS.Path(), err)
	}
	if cl.Type() != "veth" {
		return nil, result.InvalidConfig(fmt.Errorf("interface %q in %s is a %s, not a veth: bandwidth shapes the host end of a veth pair", a.Args.IfName, contNS.Path(), cl.Type()))
	}
	peer, err := ip.PeerIndex(contH, cl)
	if err != nil {
		return nil, fmt.Errorf("peer of %q in %s: %w", a.Args.IfName, contNS.Path(), err)
	}
	hostNS, h, err := a.Host()
	if err != nil {
		return nil, err
	}
	hl, err := h.LinkByIndex(peer)
	if err != nil {
		return nil, fmt.Errorf("peer #%d of %q is not in %s: %w", peer, a.Args.IfName, hostNS.Path(), err)
	}
	if result.InterfaceIndex(res, hl.Attrs().Name, "") < 0 {
		return nil, result.InvalidConfig(fmt.Errorf("prevResult lists no host interface %q (the peer of %q)", hl.Attrs().Name, a.Args.IfName))
	}
	return hl, nil
}
