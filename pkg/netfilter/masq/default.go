package masq

import (
	"fmt"
	"net"
	"sync"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// defaultMasq picks the backend for an empty ipMasqBackend: iptables, unless
// it is unusable here and nftables works (upstream's rule).
//
// Upstream probes iptables with two processes on every ADD. Here a missing
// binary is found without a process, and whether the kernel provides the nat
// table is asked only after an iptables call failed (see autoMasq), so the
// common path costs nothing extra.
func defaultMasq(exclude []*net.IPNet) (netfilter.Masq, error) {
	ipt, nft := newIPTablesMasq(), &nftablesMasq{exclude: exclude}
	ipt.exclude = exclude
	if iptErr := ipt.Usable(nftnl.IPv4); iptErr != nil {
		if nftErr := nft.usable(); nftErr != nil {
			return nil, fmt.Errorf("no masquerade backend works: %w; %w", iptErr, nftErr)
		}
		return nft, nil
	}
	return &autoMasq{ipt: ipt, nft: nft}, nil
}

// autoMasq is iptables that falls back to nftables the first time an
// iptables call fails and the probe finds the nat table unusable while
// nf_tables works. Once decided, the choice sticks for the value's life.
type autoMasq struct {
	ipt *iptablesMasq
	nft *nftablesMasq

	mu     sync.Mutex // guards chosen; calls are serialised until it is set
	chosen netfilter.Masq
}

// Backend names the backend in use; before any call it probes (two
// iptables processes) to say which one calls would use.
func (a *autoMasq) Backend() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.chosen == nil {
		a.chosen = a.ipt
		if a.ipt.NatUsable(nftnl.IPv4) != nil && a.nft.usable() == nil {
			a.chosen = a.nft
		}
	}
	return a.chosen.Backend()
}

func (a *autoMasq) do(fn func(netfilter.Masq) error) error {
	a.mu.Lock()
	if chosen := a.chosen; chosen != nil {
		a.mu.Unlock()
		return fn(chosen)
	}
	defer a.mu.Unlock()
	err := fn(a.ipt)
	if err != nil && a.ipt.NatUsable(nftnl.IPv4) != nil && a.nft.usable() == nil {
		a.chosen = a.nft
		return fn(a.nft)
	}
	a.chosen = a.ipt
	return err
}

// Prestart and Release pass to the iptables backend, which the first call
// tries (see Prestarter); Setup takes the prestarted restore through it.
func (a *autoMasq) Prestart() { a.ipt.Prestart() }
func (a *autoMasq) Release()  { a.ipt.Release() }

func (a *autoMasq) Setup(o netfilter.Owner, addrs []*net.IPNet) error {
	return a.do(func(m netfilter.Masq) error { return m.Setup(o, addrs) })
}

func (a *autoMasq) SetupUndoable(o netfilter.Owner, addrs []*net.IPNet) (undo func() error, err error) {
	err = a.do(func(m netfilter.Masq) error {
		var err error
		undo, err = m.SetupUndoable(o, addrs)
		return err
	})
	return undo, err
}

func (a *autoMasq) Teardown(o netfilter.Owner) error {
	return a.do(func(m netfilter.Masq) error { return m.Teardown(o) })
}

func (a *autoMasq) Check(o netfilter.Owner, addrs []*net.IPNet) error {
	return a.do(func(m netfilter.Masq) error { return m.Check(o, addrs) })
}

func (a *autoMasq) GC(network string, keep []netfilter.Owner) error {
	return a.do(func(m netfilter.Masq) error { return m.GC(network, keep) })
}

// MasqUsable reports, for STATUS, whether the masquerade backend that
// backend names ("" for the default) can be used in the calling thread's
// namespace. The error wraps ErrUnavailable and names the backend.
func MasqUsable(backend string) error {
	ipt, nft := newIPTablesMasq(), newNFTablesMasq()
	iptErr := func() error {
		if err := ipt.Usable(nftnl.IPv4); err != nil {
			return err
		}
		if err := ipt.NatUsable(nftnl.IPv4); err != nil {
			return fmt.Errorf("iptables nat table: %w: %w", netfilter.ErrUnavailable, err)
		}
		return nil
	}
	switch backend {
	case netfilter.BackendIPTables:
		return iptErr()
	case netfilter.BackendNFTables:
		return nft.usable()
	case "":
		if err := iptErr(); err != nil {
			if nerr := nft.usable(); nerr != nil {
				return fmt.Errorf("no masquerade backend works: %w; %w", err, nerr)
			}
		}
		return nil
	}
	return fmt.Errorf("ipMasqBackend: %q: %w", backend, netfilter.ErrUnknownBackend)
}
