package firewall

import (
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/forward"
	"github.com/cniforge/plugins/pkg/result"
)

// chosen is the resolved backend; fw is set for firewalld (close it).
type chosen struct {
	name string
	fw   *firewalld
}

func (b chosen) close() {
	if b.fw != nil {
		b.fw.Close()
	}
}

// resolve picks the backend: absent or "" is firewalld when it answers on
// the system bus, else iptables (upstream's rule); "firewalld" must answer:
// otherwise code 11 (try again later: firewalld may be starting) for ADD
// and CHECK. STATUS answers 50 instead, the spec's code for STATUS alone.
func resolve(c *netConf) (chosen, error) {
	switch c.Backend {
	case backendIPTables, backendNFTables:
		return chosen{name: c.Backend}, nil
	case "", backendFirewalld:
		fw, has, err := openFirewalld()
		if err == nil && has {
			return chosen{name: backendFirewalld, fw: fw}, nil
		}
		if err == nil {
			fw.Close()
			err = fmt.Errorf("%s does not answer on the system bus", fwdBusName)
		}
		if c.Backend == "" {
			return chosen{name: backendIPTables}, nil
		}
		return chosen{}, result.TryAgainLater(fmt.Errorf("backend: %q: %w", c.Backend, err))
	}
	return chosen{}, result.InvalidConfig(fmt.Errorf("backend: %q unknown", c.Backend)) // parseConfig refused it
}

// rulesFor is what ADD installs and CHECK compares for prev.
func rulesFor(a *attach.Attachment, c *netConf, prev *current.Result) (forward.ForwardRules, error) {
	r := forward.ForwardRules{Owner: a.Owner(), AdminChain: c.AdminChain, Policy: c.IngressPolicy, Addrs: addrsOf(prev),
		MarkBit: *c.MarkBit}
	if c.IngressPolicy != forward.IngressOpen {
		for _, i := range prev.Interfaces {
			if i != nil && i.Sandbox == "" && i.Name != "" {
				r.Bridge = i.Name
				break
			}
		}
		if r.Bridge == "" {
			return r, result.InvalidConfig(fmt.Errorf("ingressPolicy: %q needs a host interface (the bridge) in prevResult, which lists none", c.IngressPolicy))
		}
	}
	return r, nil
}

func addrsOf(prev *current.Result) []net.IP {
	if prev == nil {
		return nil
	}
	var out []net.IP
	for _, ipc := range prev.IPs {
		if ipc != nil && ipc.Address.IP != nil {
			out = append(out, ipc.Address.IP)
		}
	}
	return out
}

func add(a *attach.Attachment, c *netConf) (types.Result, error) {
	if c.unknownBackend != "" {
		a.Log.Warn("backend unknown: taken as absent (firewalld when it runs, else iptables), as upstream's", "backend", c.unknownBackend)
	}
	prev, err := c.RequirePrev("prevResult: missing: firewall runs chained after an interface plugin (ADD)")
	if err != nil {
		return nil, err
	}
	r, err := rulesFor(a, c, prev)
	if err != nil {
		return nil, err
	}
	be, err := resolve(c)
	if err != nil {
		return nil, err
	}
	defer be.close()
	if err := a.Step(StepResolve); err != nil {
		return nil, err
	}
	if be.fw != nil {
		// addSources removes what it added when it fails.
		added, err := be.fw.addSources(c.Zone, r.Addrs)
		if err != nil {
			return nil, err
		}
		// The undo runs after add returned and closed be: it connects
		// anew. It removes only the sources this ADD added: over a live
		// attachment (check --repair, a second ADD) the ones there
		// before carry the pod's traffic.
		a.Undo.Push("remove firewalld sources", func() error { return removeFirewalldSources(c.Zone, added) })
	} else {
		fw, err := forward.NewForward(be.name)
		if err != nil {
			return nil, err
		}
		// Setup leaves the rules as they were when it fails, so the undo
		// follows it. The undo puts back what was there: an ADD over a
		// live attachment (check --repair, a second ADD) must not take a
		// running pod's allow rules away when a later step fails.
		undo, err := fw.SetupUndoable(r)
		if err != nil {
			return nil, fmt.Errorf("firewall (%s): %w", be.name, err)
		}
		a.Undo.Push("restore forward rules", undo)
	}
	if err := a.Step(StepRules); err != nil {
		return nil, err
	}
	return prev, nil
}

// del removes the attachment's iptables rules of both forms (a prevResult
// that does not parse only costs upstream's uncommented rules, which need
// its addresses) and, unless the backend is iptables, its firewalld
// sources when firewalld answers (those need prevResult's addresses).
func del(a *attach.Attachment, c *netConf) []error {
	prev, err := c.Prev()
	if err != nil {
		a.Log.Warn("prevResult unreadable; removing this attachment's own rules only", "err", err)
	}
	addrs := addrsOf(prev)
	errs := []error{forward.TeardownForwardAll(a.Owner(), addrs)}
	if c.Backend != backendIPTables && len(addrs) > 0 {
		errs = append(errs, removeFirewalldSources(c.Zone, addrs))
	}
	return errs
}

// removeFirewalldSources takes ips out of zone when firewalld answers on
// the system bus; without firewalld there is nothing to remove.
func removeFirewalldSources(zone string, ips []net.IP) error {
	fw, has, err := openFirewalld()
	if err != nil {
		return nil // no system bus: no firewalld, so no sources either
	}
	defer fw.Close()
	if !has {
		return nil
	}
	return fw.removeSources(zone, ips)
}

func check(a *attach.Attachment, c *netConf, prev *current.Result) error {
	r, err := rulesFor(a, c, prev)
	if err != nil {
		return err
	}
	be, err := resolve(c)
	if err != nil {
		return err
	}
	defer be.close()
	if be.fw != nil {
		return be.fw.checkSources(c.Zone, r.Addrs)
	}
	fw, err := forward.NewForward(be.name)
	if err != nil {
		return err
	}
	return fw.Check(r)
}

// gc collects iptables rules; firewalld sources name no owner, so a DEL
// (with prevResult) is what removes them.
func gc(a *attach.Attachment, c *netConf, keep []netfilter.Owner) []error {
	return []error{forward.GCForwardAll(c.Name, keep)}
}

func status(a *attach.Attachment, c *netConf) error {
	be, err := resolve(c)
	if result.Code(err) == types.ErrTryAgainLater {
		return types.NewError(result.CodeUnavailable, err.Error(), "")
	}
	if err != nil {
		return err
	}
	defer be.close()
	if be.fw != nil {
		return nil
	}
	if err := forward.ForwardUsable(be.name); err != nil {
		return result.Unavailable(fmt.Errorf("backend %q: %w", be.name, err))
	}
	return nil
}
