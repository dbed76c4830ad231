package bandwidth

import (
	"errors"
	"fmt"
	"net"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
)

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
		if err := checkTbf(h, p.host, *p.ingress, p.upIngress); err != nil {
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
	if ifb.Attrs().Flags&net.FlagUp == 0 {
		// What the container sends is redirected to it: dropped.
		return fmt.Errorf("ifb %q in %s is down", p.ifbName, hostNS.Path())
	}
	if err := checkTbf(h, ifb, *p.egress, p.upEgress); err != nil {
		return fmt.Errorf("%q in %s: %w", p.ifbName, hostNS.Path(), err)
	}
	if q, err := ingressHookQdisc(h, p.host); err != nil {
		return fmt.Errorf("in %s: %w", hostNS.Path(), err)
	} else if q == nil {
		return fmt.Errorf("%q in %s has no ingress or clsact qdisc", hostName, hostNS.Path())
	}
	if !redirectsTo(h, p.host, ifb.Attrs().Index) {
		return fmt.Errorf("the ingress of %q in %s is not redirected to %q", hostName, hostNS.Path(), p.ifbName)
	}
	return nil
}

// checkTbf compares the root tbf of l with want, or with upstream's
// parameters for the same limits (an attachment upstream made).
func checkTbf(h *netlink.Handle, l netlink.Link, want, upstream tbfParams) error {
	qs, err := h.QdiscList(l)
	if err != nil {
		return err
	}
	for _, q := range qs {
		t, ok := q.(*netlink.Tbf)
		if !ok || q.Attrs().Parent != netlink.HANDLE_ROOT {
			continue
		}
		got := tbfParams{Rate: t.Rate, Buffer: t.Buffer, Limit: t.Limit}
		if got != want && got != upstream {
			return fmt.Errorf("tbf has rate %d B/s buffer %d limit %d, configured rate %d B/s buffer %d limit %d",
				t.Rate, t.Buffer, t.Limit, want.Rate, want.Buffer, want.Limit)
		}
		return nil
	}
	return errors.New("no tbf root qdisc")
}
