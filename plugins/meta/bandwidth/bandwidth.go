package bandwidth

import (
	"errors"
	"fmt"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/result"
)

var (
	rootHandle    = netlink.MakeHandle(1, 0)
	ingressHandle = netlink.MakeHandle(0xffff, 0)
)

// plan is what ADD will make, resolved before any change.
type plan struct {
	host             netlink.Link // the host end of the container's veth
	ingress, egress  *tbfParams   // nil: no limit that way
	ifbName, ifAlias string
	clamped          []clamp // bursts cut to what tbf can hold
}

func add(a *attach.Attachment, c *netConf) (types.Result, error) {
	res := a.Prev
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
	_, h, err := a.Host()
	if err != nil {
		return nil, err
	}
	hostName := p.host.Attrs().Name

	if p.ingress != nil {
		q := tbf(p.host.Attrs().Index, *p.ingress)
		if err := h.QdiscAdd(q); err != nil {
			return nil, fmt.Errorf("add tbf to %q: %w", hostName, err)
		}
		a.Undo.Push("delete tbf of "+hostName, func() error { return qdiscDel(h, q) })
	}
	if err := a.Step(StepIngress); err != nil {
		return nil, err
	}
	if p.egress == nil {
		return res, nil
	}

	ifb, err := setupIfb(h, p.ifbName, p.ifAlias, IfbGroup(c.Name), p.host.Attrs().MTU)
	if err != nil {
		return nil, err
	}
	a.Undo.Push("delete ifb "+p.ifbName, func() error { return ip.DelLinkByName(h, p.ifbName) })
	if err := a.Step(StepIfb); err != nil {
		return nil, err
	}

	ingress := &netlink.Ingress{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: p.host.Attrs().Index, Handle: ingressHandle, Parent: netlink.HANDLE_INGRESS}}
	if err := h.QdiscAdd(ingress); err != nil {
		return nil, fmt.Errorf("add ingress qdisc to %q: %w", hostName, err)
	}
	a.Undo.Push("delete ingress qdisc of "+hostName, func() error { return qdiscDel(h, ingress) })
	if err := h.FilterAdd(redirect(p.host.Attrs().Index, ifb.Attrs().Index)); err != nil {
		return nil, fmt.Errorf("redirect the ingress of %q to %q (u32, mirred): %w", hostName, p.ifbName, err)
	}
	if err := a.Step(StepRedirect); err != nil {
		return nil, err
	}

	if err := h.QdiscAdd(tbf(ifb.Attrs().Index, *p.egress)); err != nil {
		return nil, fmt.Errorf("add tbf to %q: %w", p.ifbName, err)
	}
	if err := a.Step(StepEgress); err != nil {
		return nil, err
	}
	res.Interfaces = append(res.Interfaces, &current.Interface{Name: p.ifbName, Mac: ifb.Attrs().HardwareAddr.String()})
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
	}{
		{"ingress", c.bw.IngressRate, c.bw.IngressBurst, &p.ingress},
		{"egress", c.bw.EgressRate, c.bw.EgressBurst, &p.egress},
	} {
		if d.rate == 0 {
			continue
		}
		t, burst, clamped := tbfFor(d.rate, d.burst, tick)
		*d.to = &t
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

func tbf(index int, t tbfParams) *netlink.Tbf {
	return &netlink.Tbf{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: index, Handle: rootHandle, Parent: netlink.HANDLE_ROOT},
		Rate:       t.Rate, Buffer: t.Buffer, Limit: t.Limit,
	}
}

func redirect(hostIndex, ifbIndex int) *netlink.U32 {
	return &netlink.U32{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: hostIndex, Parent: ingressHandle, Priority: 1, Protocol: unix.ETH_P_ALL},
		ClassId:     netlink.MakeHandle(1, 1),
		RedirIndex:  ifbIndex,
	}
}

// setupIfb creates the ifb, up, with the host end's MTU and upstream's
// queue length, in the network's link group, and marks it with the alias GC
// reads.
func setupIfb(h *netlink.Handle, name, alias string, group uint32, mtu int) (netlink.Link, error) {
	la := netlink.NewLinkAttrs()
	la.Name = name
	la.Group = group
	la.MTU = mtu
	la.TxQLen = 1000
	la.Flags = unix.IFF_UP
	if err := h.LinkAdd(&netlink.Ifb{LinkAttrs: la}); err != nil {
		return nil, fmt.Errorf("add ifb %q: %w", name, err)
	}
	l, err := ip.LinkByName(h, name)
	if err == nil {
		err = h.LinkSetAlias(l, alias)
	}
	if err == nil {
		err = h.LinkSetUp(l)
	}
	if err != nil {
		_ = ip.DelLinkByName(h, name) // best effort: the undo is not pushed yet
		return nil, fmt.Errorf("ifb %q: %w", name, err)
	}
	return l, nil
}

func qdiscDel(h *netlink.Handle, q netlink.Qdisc) error {
	if err := h.QdiscDel(q); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENODEV) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("delete %s qdisc: %w", q.Type(), err)
	}
	return nil
}

// del deletes the ifb by name: no netns and no prevResult needed, and an
// upstream ADD's ifb has the same name. When prevResult names the host end
// and it still exists, the qdiscs ADD put there go too (the veth usually
// goes with the main plugin's DEL, taking them along).
func del(a *attach.Attachment, c *netConf) []error {
	hostNS, h, err := a.Host()
	if err != nil {
		return []error{err}
	}
	var errs []error
	if err := ip.DelLinkByName(h, IfbName(c.Name, a.Args.ContainerID)); err != nil {
		errs = append(errs, fmt.Errorf("in %s: %w", hostNS.Path(), err))
	}
	prev, err := a.Conf.Prev()
	if err != nil || prev == nil {
		return errs // DEL does not fail on a prevResult it cannot read
	}
	for _, iface := range prev.Interfaces {
		if iface.Sandbox != "" || strings.HasPrefix(iface.Name, "bwp") {
			continue
		}
		l, err := ip.LinkByName(h, iface.Name)
		if err != nil || l.Type() != "veth" {
			continue
		}
		if err := deleteShaping(h, l); err != nil {
			errs = append(errs, fmt.Errorf("in %s: %w", hostNS.Path(), err))
		}
	}
	return errs
}

// deleteShaping deletes the qdiscs ADD puts on a host end l: the root tbf
// and the ingress qdisc (its redirect to the ifb goes with it).
func deleteShaping(h *netlink.Handle, l netlink.Link) error {
	qs, err := h.QdiscList(l)
	if err != nil {
		return fmt.Errorf("qdiscs of %q: %w", l.Attrs().Name, err)
	}
	var errs []error
	for _, q := range qs {
		_, isTbf := q.(*netlink.Tbf)
		_, isIngress := q.(*netlink.Ingress)
		if (isTbf && q.Attrs().Handle == rootHandle && q.Attrs().Parent == netlink.HANDLE_ROOT) || isIngress {
			if err := qdiscDel(h, q); err != nil {
				errs = append(errs, fmt.Errorf("%q: %w", l.Attrs().Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// redirectsTo reports whether the ingress of l is redirected to the link
// with index ifb (the egress shaping ADD sets up).
func redirectsTo(h *netlink.Handle, l netlink.Link, ifb int) bool {
	fs, err := h.FilterList(l, ingressHandle)
	if err != nil {
		return false // no ingress qdisc
	}
	for _, f := range fs {
		u, ok := f.(*netlink.U32)
		if !ok {
			continue
		}
		if u.RedirIndex == ifb {
			return true
		}
		for _, act := range u.Actions {
			if m, ok := act.(*netlink.MirredAction); ok && m.Ifindex == ifb {
				return true
			}
		}
	}
	return false
}

// check compares the kernel with the config: the tbf on the host end, and
// for egress the ifb, the ingress qdisc, the redirect and the ifb's tbf.
func check(a *attach.Attachment, c *netConf, prev *current.Result) error {
	if c.bw.isZero() {
		return nil
	}
	p, err := resolve(a, c, prev)
	if err != nil {
		return err
	}
	hostNS, h, err := a.Host()
	if err != nil {
		return err
	}
	hostName := p.host.Attrs().Name
	if p.ingress != nil {
		if err := checkTbf(h, p.host, *p.ingress); err != nil {
			return fmt.Errorf("%q in %s: %w", hostName, hostNS.Path(), err)
		}
	}
	if p.egress == nil {
		return nil
	}
	ifb, err := ip.LinkByName(h, p.ifbName)
	if err != nil {
		return fmt.Errorf("ifb in %s: %w", hostNS.Path(), err)
	}
	if ifb.Type() != "ifb" {
		return fmt.Errorf("%q in %s is a %s, not an ifb", p.ifbName, hostNS.Path(), ifb.Type())
	}
	if err := checkTbf(h, ifb, *p.egress); err != nil {
		return fmt.Errorf("%q in %s: %w", p.ifbName, hostNS.Path(), err)
	}
	qs, err := h.QdiscList(p.host)
	if err != nil {
		return err
	}
	found := false
	for _, q := range qs {
		if _, ok := q.(*netlink.Ingress); ok {
			found = true
		}
	}
	if !found {
		return fmt.Errorf("%q in %s has no ingress qdisc", hostName, hostNS.Path())
	}
	fs, err := h.FilterList(p.host, ingressHandle)
	if err != nil {
		return fmt.Errorf("filters of %q in %s: %w", hostName, hostNS.Path(), err)
	}
	for _, f := range fs {
		u, ok := f.(*netlink.U32)
		if !ok {
			continue
		}
		for _, act := range u.Actions {
			if m, ok := act.(*netlink.MirredAction); ok && m.Ifindex == ifb.Attrs().Index && m.MirredAction == netlink.TCA_EGRESS_REDIR {
				return nil
			}
		}
		if u.RedirIndex == ifb.Attrs().Index {
			return nil
		}
	}
	return fmt.Errorf("the ingress of %q in %s is not redirected to %q", hostName, hostNS.Path(), p.ifbName)
}

func checkTbf(h *netlink.Handle, l netlink.Link, want tbfParams) error {
	qs, err := h.QdiscList(l)
	if err != nil {
		return err
	}
	for _, q := range qs {
		t, ok := q.(*netlink.Tbf)
		if !ok || q.Attrs().Parent != netlink.HANDLE_ROOT {
			continue
		}
		if t.Rate != want.Rate || t.Buffer != want.Buffer || t.Limit != want.Limit {
			return fmt.Errorf("tbf has rate %d B/s buffer %d limit %d, configured rate %d B/s buffer %d limit %d",
				t.Rate, t.Buffer, t.Limit, want.Rate, want.Buffer, want.Limit)
		}
		return nil
	}
	return errors.New("no tbf root qdisc")
}

// gc deletes the ifbs this suite made for network c.Name (by their alias,
// or, without one, by their link group) whose container is not in keep,
// and the shaping of the host end that redirects to one. Upstream's ifbs
// carry no alias and stay:
// their name does not say which network they belong to.
func gc(a *attach.Attachment, c *netConf, keep []netfilter.Owner) []error {
	hostNS, h, err := a.Host()
	if err != nil {
		return []error{err}
	}
	kept := map[string]bool{}
	for _, o := range keep {
		kept[ifbAlias(c.Name, o.ContainerID)] = true
	}
	links, err := ip.LinkList(h)
	if err != nil {
		return []error{fmt.Errorf("in %s: %w", hostNS.Path(), err)}
	}
	keptNames := map[string]bool{}
	for _, o := range keep {
		keptNames[IfbName(c.Name, o.ContainerID)] = true
	}
	var errs []error
	mine, group := ifbAlias(c.Name, ""), IfbGroup(c.Name)
	for _, l := range links {
		al, name := l.Attrs().Alias, l.Attrs().Name
		if l.Type() != "ifb" || !strings.HasPrefix(name, "bwp") {
			continue
		}
		switch {
		case al == "" && l.Attrs().Group == group:
			// An ADD killed between making the ifb and setting its alias:
			// the group says whose, the name whether a listed container's.
			if keptNames[name] {
				continue
			}
		case !strings.HasPrefix(al, mine) || kept[al]:
			continue
		case IfbName(c.Name, strings.TrimPrefix(al, mine)) != name:
			continue // an alias that does not match the name: not ours
		}
		// A host end still there (its container is gone, or its main
		// plugin kept it) loses the shaping that sends its traffic to the
		// ifb, and the tbf beside it. An ingress-only attachment has no
		// ifb, and GC cannot tell its tbf from an admin's.
		for _, hl := range links {
			if hl.Type() == "veth" && redirectsTo(h, hl, l.Attrs().Index) {
				a.Log.Info("gc: deleting shaping", "link", hl.Attrs().Name)
				if err := deleteShaping(h, hl); err != nil {
					errs = append(errs, fmt.Errorf("in %s: %w", hostNS.Path(), err))
				}
			}
		}
		a.Log.Info("gc: deleting ifb", "ifb", l.Attrs().Name)
		if err := ip.DelLinkByName(h, l.Attrs().Name); err != nil {
			errs = append(errs, fmt.Errorf("in %s: %w", hostNS.Path(), err))
		}
	}
	return errs
}
