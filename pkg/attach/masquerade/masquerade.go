// Package masquerade is the plugin frame's masquerade (source NAT of the
// container's addresses), for the plugins that offer it (bridge, ptp):
// Start or Prepare at ADD, Check at CHECK, and Frame, which a plugin passes
// in attach.Plugin.Masq so that the frame tears the rules down on DEL,
// collects them on GC and probes the backend on STATUS.
//
// It is the only link from pkg/attach to the rule machinery
// (pkg/netfilter): a plugin that does not import it (loopback, the link
// plugins, the chained ones) links no netfilter code. It never decides
// rules itself: they are pkg/netfilter's Masq.
package masquerade

import (
	"errors"
	"fmt"
	"net"
	"sync"

	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/masq"
	"github.com/cniforge/plugins/pkg/owner"
)

// Frame is the masquerade the frame drives (see attach.Masquerade): a
// plugin whose config embeds attach.Masq passes Frame{} in Plugin.Masq.
type Frame struct{}

// TeardownAll removes o's rules from both backends (masq.TeardownMasqAll).
func (Frame) TeardownAll(o owner.Owner) error { return masq.TeardownMasqAll(o) }

// GCAll removes network's rules of owners not in keep from both backends
// (masq.GCMasqAll).
func (Frame) GCAll(network string, keep []owner.Owner) error {
	return masq.GCMasqAll(network, keep)
}

// Usable says whether backend works here (masq.MasqUsable).
func (Frame) Usable(backend string) error { return masq.MasqUsable(backend) }

// Start starts installing masquerade for addrs with m's backend, in
// the plugin's host namespace, beside the caller's next steps (an
// iptables-restore is a process start; the container's configuration
// needs none of it), and returns the wait for its outcome. The caller
// calls wait at the point the rules must be in place; until then, and on
// every path out of ADD, the undo it pushes waits before it tears down, so
// a rollback never races the setup. A failed Setup leaves the rules as
// they were (nftables: one batch; iptables: puts back the families it
// changed), and the undo after a later failure does the same for a
// successful one: nothing for a fresh attachment, a live one's rules
// kept.
func Start(a *attach.Attachment, m *attach.Masq, addrs []*net.IPNet) (wait func() error) {
	return prepare(a, m, false).Start(addrs)
}

// Prepare is Start in two halves, for a plugin that knows it will
// masquerade before it knows the addresses: it creates m's backend now and
// lets it start its process (iptables-nft: the restore, see
// netfilter.Prestarter) beside the caller's link and IPAM work. Start then
// does what Start does. The caller defers Release, which ends a
// prestarted process that Start did not get to use.
func Prepare(a *attach.Attachment, m *attach.Masq) *Prepared {
	return prepare(a, m, true)
}

func prepare(a *attach.Attachment, m *attach.Masq, prestart bool) *Prepared {
	p := &Prepared{a: a}
	p.masq, p.err = masq.NewMasq(m.Backend(), m.ExcludedCIDRs()...)
	p.prestarted = func() {}
	if pre, ok := p.masq.(netfilter.Prestarter); ok && prestart && p.err == nil {
		p.pre = pre
		ready := a.Beside(func() error { pre.Prestart(); return nil })
		p.prestarted = sync.OnceFunc(func() { <-ready })
	}
	return p
}

// Prepared is a masquerade backend made ready by Prepare.
type Prepared struct {
	a    *attach.Attachment
	masq netfilter.Masq
	err  error
	pre  netfilter.Prestarter // nil when nothing was prestarted
	// prestarted waits for the prestart to be over.
	prestarted func()
	started    bool
}

// Start is the package's Start with the prepared backend. The setup first waits for
// the prestart to be over, and releases what it did not use.
func (p *Prepared) Start(addrs []*net.IPNet) (wait func() error) {
	if p.err != nil {
		return func() error { return p.err }
	}
	p.started = true
	owner := p.a.Owner()
	// undo puts back what o's rules were before: an ADD for an attachment
	// whose rules are there (its veth pair went without a DEL; ptp starts
	// this before its veth step, whose failure then runs the undo) must not
	// take its masquerade away.
	var undo func() error
	done := p.a.Beside(func() error {
		p.prestarted()
		defer p.release()
		var err error
		if undo, err = p.masq.SetupUndoable(owner, addrs); err != nil {
			return fmt.Errorf("masquerade (%s): %w", p.masq.Backend(), err)
		}
		return nil
	})
	wait = sync.OnceValue(func() error { return errors.Join(<-done...) })
	p.a.Undo.Push("restore masquerade", func() error {
		if wait() != nil || undo == nil { // its error is ADD's; Setup left the rules as they were
			return nil
		}
		return undo()
	})
	return wait
}

// Release ends a prestarted process when Start was not called (an ADD
// that failed before its addresses, or has none). After Start, the setup
// releases it.
func (p *Prepared) Release() {
	if !p.started {
		p.release()
	}
}

func (p *Prepared) release() {
	if p.pre == nil {
		return
	}
	p.prestarted()
	p.pre.Release()
}

// Check checks the masquerade rules for ipcs when the config asks for
// them. The rules live in the plugin thread's namespace, the host's.
func Check(a *attach.Attachment, m *attach.Masq, ipcs []*current.IPConfig) error {
	if !m.IPMasq || len(ipcs) == 0 {
		return nil
	}
	masq, err := masq.NewMasq(m.Backend(), m.ExcludedCIDRs()...)
	if err != nil {
		return err
	}
	if err := masq.Check(a.Owner(), attach.Addrs(ipcs)); err != nil {
		return fmt.Errorf("masquerade (%s): %w", masq.Backend(), err)
	}
	return nil
}
