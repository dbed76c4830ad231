package firewall

import (
	"errors"
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/result"
)

// errNotBuilt marks a backend this build does not implement yet.
var errNotBuilt = errors.New("not implemented in this build")

// backend resolves c.Backend: absent or "" is iptables (firewalld
// detection is not built yet; see README).
func backend(c *netConf) (string, error) {
	switch c.Backend {
	case "", backendIPTables:
		return netfilter.BackendIPTables, nil
	}
	return "", result.Unavailable(fmt.Errorf("backend: %q: %w", c.Backend, errNotBuilt))
}

// rulesFor is what ADD installs and CHECK compares for prev.
func rulesFor(a *attach.Attachment, c *netConf, prev *current.Result) (netfilter.ForwardRules, error) {
	r := netfilter.ForwardRules{Owner: a.Owner(), AdminChain: c.AdminChain, Policy: c.IngressPolicy, Addrs: addrsOf(prev)}
	if c.IngressPolicy != netfilter.IngressOpen {
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

func needPrev(c *netConf, verb string) (*current.Result, error) {
	prev, err := c.Prev()
	if err != nil {
		return nil, err
	}
	if prev == nil {
		return nil, result.InvalidConfig(fmt.Errorf("prevResult: missing: firewall runs chained after an interface plugin (%s)", verb))
	}
	return prev, nil
}

func add(a *attach.Attachment, c *netConf) (types.Result, error) {
	prev, err := needPrev(c, "ADD")
	if err != nil {
		return nil, err
	}
	be, err := backend(c)
	if err != nil {
		return nil, err
	}
	r, err := rulesFor(a, c, prev)
	if err != nil {
		return nil, err
	}
	fw, err := netfilter.NewForward(be)
	if err != nil {
		return nil, err
	}
	if err := a.Step(StepResolve); err != nil {
		return nil, err
	}
	// Setup leaves nothing behind when it fails, so the undo follows it.
	if err := fw.Setup(r); err != nil {
		return nil, fmt.Errorf("firewall (%s): %w", be, err)
	}
	a.Undo.Push("remove forward rules", func() error { return netfilter.TeardownForwardAll(r.Owner, r.Addrs) })
	if err := a.Step(StepRules); err != nil {
		return nil, err
	}
	return prev, nil
}

// del removes the rules of both forms; a prevResult that does not parse
// only costs upstream's uncommented rules (they need its addresses).
func del(a *attach.Attachment, c *netConf) []error {
	prev, err := c.Prev()
	if err != nil {
		a.Log.Warn("prevResult unreadable; removing this attachment's own rules only", "err", err)
	}
	return []error{netfilter.TeardownForwardAll(a.Owner(), addrsOf(prev))}
}

func check(a *attach.Attachment, c *netConf, prev *current.Result) error {
	be, err := backend(c)
	if err != nil {
		return err
	}
	r, err := rulesFor(a, c, prev)
	if err != nil {
		return err
	}
	fw, err := netfilter.NewForward(be)
	if err != nil {
		return err
	}
	return fw.Check(r)
}

func gc(a *attach.Attachment, c *netConf, keep []netfilter.Owner) []error {
	return []error{netfilter.GCForwardAll(c.Name, keep)}
}

func status(a *attach.Attachment, c *netConf) error {
	be, err := backend(c)
	if err != nil {
		return err
	}
	if err := netfilter.ForwardUsable(be); err != nil {
		return result.Unavailable(fmt.Errorf("backend %q: %w", be, err))
	}
	return nil
}
