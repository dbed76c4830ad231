package dhcp

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ns"
)

// retryAcquire runs try until it returns a lease, fails with errGone or
// ctx ends, waiting 2s after the first failure and twice as long after
// each next one, at most ResendMax. family ("DHCPv4") names the lease in
// the error, which wraps the last failure.
func retryAcquire[L any](ctx context.Context, d *daemon, rec *record, family string, try func() (L, error)) (L, error) {
	wait := 2 * time.Second
	var zero L
	for {
		l, err := try()
		if err == nil {
			return l, nil
		}
		if errors.Is(err, errGone) {
			return zero, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return zero, fmt.Errorf("no %s lease on %q in %s: %w", family, rec.IfName, rec.Netns, err)
		case <-t.C:
		}
		wait = min(2*wait, d.opts.ResendMax)
	}
}

// errGone says the attachment's netns or interface no longer exists: the
// lease is dropped, since nothing can use (or renew) it any more.
var errGone = errors.New("attachment gone")

// lease is one attachment's lease and the goroutine that keeps it.
type lease struct {
	d    *daemon
	id   string
	conf *Config

	mu   sync.Mutex
	rec  *record
	v4   *nclient4.Lease
	v4At time.Time // when v4's ACK arrived
	v6   *lease6
	lost bool // expired without renewal, or refused (NAK)

	cancel context.CancelFunc
	done   chan struct{}
}

func (d *daemon) nsPath(netns string) string {
	if d.opts.HostPrefix == "" {
		return netns
	}
	return filepath.Join(d.opts.HostPrefix, netns)
}

// inNS opens the attachment's netns and runs fn inside it, on a thread of
// its own. A missing netns or interface is errGone. Sockets made in fn stay
// in that netns for life, so they can be used after fn returns.
func (d *daemon) inNS(netns, ifName string, fn func() error) error {
	n, err := ns.Open(d.nsPath(netns))
	if err != nil {
		return fmt.Errorf("%w: %v", errGone, err)
	}
	defer n.Close()
	return n.Do(func() error {
		if _, err := netlink.LinkByName(ifName); err != nil {
			var nf netlink.LinkNotFoundError
			if errors.As(err, &nf) {
				return fmt.Errorf("%w: interface %q not in %s", errGone, ifName, netns)
			}
			return fmt.Errorf("look up %q in %s: %w", ifName, netns, err)
		}
		return fn()
	})
}

func leaseFromRecord(d *daemon, rec *record) (*lease, error) {
	conf, err := parseConfig(rec.Stdin)
	if err != nil {
		return nil, err
	}
	l := &lease{d: d, id: rec.ClientID, conf: conf, rec: rec}
	if rec.V4 != nil {
		offer, err := dhcpv4.FromBytes(rec.V4.Offer)
		if err != nil {
			return nil, fmt.Errorf("offer: %w", err)
		}
		ack, err := dhcpv4.FromBytes(rec.V4.ACK)
		if err != nil {
			return nil, fmt.Errorf("ack: %w", err)
		}
		l.v4 = &nclient4.Lease{Offer: offer, ACK: ack, CreationTime: rec.V4.Acquired}
		l.v4At = rec.V4.Acquired
	}
	if rec.V6 != nil {
		v6, err := lease6FromRecord(rec.V6)
		if err != nil {
			return nil, err
		}
		l.v6 = v6
	}
	return l, nil
}

// persist writes the lease's current state (caller holds l.mu).
func (l *lease) persist() error {
	if l.v4 != nil {
		l.rec.V4 = &v4Rec{Offer: l.v4.Offer.ToBytes(), ACK: l.v4.ACK.ToBytes(), Acquired: l.v4At}
	}
	if l.v6 != nil {
		l.rec.V6 = l.v6.toRecord()
	}
	return saveRecord(l.d.opts.StateDir, l.rec)
}

func (l *lease) isLost() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// live reports whether the lease is held: not refused, not expired.
func (l *lease) live(now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost {
		return fmt.Errorf("lease for %s lost: the server refused or did not renew it", l.id)
	}
	if l.v4 != nil {
		if _, _, exp := times4(l.v4.ACK, l.v4At); now.After(exp) {
			return fmt.Errorf("DHCPv4 lease %s for %s expired at %s", l.v4.ACK.YourIPAddr, l.id, exp.Format(time.RFC3339))
		}
	}
	if l.v6 != nil {
		if exp := l.v6.expiry(); now.After(exp) {
			return fmt.Errorf("DHCPv6 lease %s for %s expired at %s", l.v6.addr, l.id, exp.Format(time.RFC3339))
		}
	}
	return nil
}

// result is the lease as a CNI result.
func (l *lease) result() *current.Result {
	l.mu.Lock()
	defer l.mu.Unlock()
	res := &current.Result{CNIVersion: current.ImplementedSpecVersion}
	if l.v4 != nil {
		ip, routes := result4(l.v4.ACK, l.conf.Priority)
		res.IPs = append(res.IPs, ip)
		res.Routes = append(res.Routes, routes...)
	}
	if l.v6 != nil {
		res.IPs = append(res.IPs, l.v6.ipConfig())
	}
	return res
}

// start runs l's maintenance until l.stop or the daemon ends.
func (d *daemon) start(l *lease) {
	ctx, cancel := context.WithCancel(d.ctx)
	l.cancel = cancel
	l.done = make(chan struct{})
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer close(l.done)
		l.maintain(ctx)
	}()
}

// stop ends l's maintenance and waits for it.
func (l *lease) stop() {
	if l.cancel != nil {
		l.cancel()
		<-l.done
	}
}

// maintain renews the lease at T1, rebinds at T2 and, once it expired,
// tries to get one again every ResendMax. It returns when ctx ends or when
// the attachment's interface is gone (the lease is then dropped).
func (l *lease) maintain(ctx context.Context) {
	log := l.d.log.With("clientID", l.id)
	retryAt := time.Time{}
	for {
		next := l.nextEvent()
		if !retryAt.IsZero() && retryAt.After(next) {
			next = retryAt
		}
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		err := l.refresh(ctx)
		switch {
		case err == nil:
			retryAt = time.Time{}
			log.Debug("lease refreshed")
		case errors.Is(err, errGone):
			log.Info("dropping lease: interface gone", "err", err)
			l.d.drop(l)
			return
		case ctx.Err() != nil:
			return
		default:
			// A lost lease is retried every ResendMax; a renewal at half
			// the time left before T2 (then expiry), at least 1 s apart.
			wait := l.d.opts.ResendMax
			if !l.isLost() {
				if rem := time.Until(l.nextDeadline()) / 2; rem < wait {
					wait = max(rem, time.Second)
				}
			}
			retryAt = time.Now().Add(wait)
			log.Warn("lease refresh failed", "err", err, "retryIn", wait)
		}
	}
}

// nextEvent is when the lease next needs work: the earliest T1 of its
// families (or now, for a lost lease, which is retried at once and then at
// the pace maintain sets).
func (l *lease) nextEvent() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost {
		return time.Now()
	}
	next := time.Now().Add(24 * time.Hour)
	if l.v4 != nil {
		if t1, _, _ := times4(l.v4.ACK, l.v4At); t1.Before(next) {
			next = t1
		}
	}
	if l.v6 != nil {
		if t1 := l.t1v6(); t1.Before(next) {
			next = t1
		}
	}
	return next
}

// nextDeadline is the next of T2 and expiry still ahead: retries of a failed
// renewal are spaced to half the time left before it (RFC 2131 4.4.5).
func (l *lease) nextDeadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if l.v4 != nil {
		_, t2, exp := times4(l.v4.ACK, l.v4At)
		if now.Before(t2) {
			return t2
		}
		return exp
	}
	if l.v6 != nil {
		return l.v6.expiry()
	}
	return now
}

// refresh renews (or, once lost, re-acquires) every family of the lease
// that is due, and persists the outcome.
func (l *lease) refresh(ctx context.Context) error {
	now := time.Now()
	var errs []error
	if l.v4 != nil {
		if err := l.refresh4(ctx, now); err != nil {
			errs = append(errs, err)
		}
	}
	if l.v6 != nil {
		if err := l.refresh6(ctx, now); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// release sends RELEASE for every family, best effort: a netns or interface
// that is gone cannot send, and the server then lets the lease expire.
func (l *lease) release() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	if l.v4 != nil {
		c, err := l.d.client4(l.rec.Netns, l.rec.IfName, l.v4.ACK.YourIPAddr)
		if err == nil {
			err = c.Release(l.v4, l.d.modifiers4(l.conf, l.id, l.rec.CNIArgs)...)
			c.Close()
		}
		if err != nil && !errors.Is(err, errGone) {
			errs = append(errs, fmt.Errorf("DHCPv4 release of %s: %w", l.v4.ACK.YourIPAddr, err))
		}
	}
	if l.v6 != nil {
		if err := l.release6(); err != nil && !errors.Is(err, errGone) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// drop forgets l (its interface is gone). Called from l's own goroutine,
// so it takes no attachment lock: an Allocate or Release for the same ID
// holds that lock and waits for this goroutine to end before it goes on.
func (d *daemon) drop(l *lease) {
	d.mu.Lock()
	mine := d.leases[l.id] == l
	if mine {
		delete(d.leases, l.id)
	}
	d.mu.Unlock()
	if mine {
		if err := removeRecord(d.opts.StateDir, l.id); err != nil {
			d.log.Error("remove lease record", "clientID", l.id, "err", err)
		}
	}
}
