package dhcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/mdlayher/packet"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/ns"
)

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

// client4 opens a DHCPv4 client on the attachment's interface. With src
// (the leased address) its packets leave from that address and it hears
// only replies to it: a renewal or a RELEASE from 0.0.0.0 to a unicast
// server address is a martian to the server's kernel, which drops it.
func (d *daemon) client4(netns, ifName string, src net.IP) (*nclient4.Client, error) {
	// Each packet waits at most Timeout/3 so one exchange (with its
	// retries) fits in Timeout.
	opts := []nclient4.ClientOpt{nclient4.WithTimeout(d.opts.Timeout / 3), nclient4.WithRetry(3)}
	var c *nclient4.Client
	err := d.inNS(netns, ifName, func() error {
		if src == nil {
			var err error
			c, err = nclient4.New(ifName, opts...)
			return err
		}
		ifc, err := net.InterfaceByName(ifName)
		if err != nil {
			return err
		}
		raw, err := packet.Listen(ifc, packet.Datagram, unix.ETH_P_IP, nil)
		if err != nil {
			return err
		}
		conn := nclient4.NewBroadcastUDPConn(raw, &net.UDPAddr{IP: src.To4(), Port: nclient4.ClientPort})
		c, err = nclient4.NewWithConn(conn, ifc.HardwareAddr, opts...)
		if err != nil {
			raw.Close()
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dhcp client on %q in %s: %w", ifName, netns, err)
	}
	return c, nil
}

// modifiers4 are the options every DHCPv4 message of the attachment
// carries: the client ID (upstream's), the requested and provided options.
func (d *daemon) modifiers4(conf *Config, id, cniArgs string) []dhcpv4.Modifier {
	codes := make([]dhcpv4.OptionCode, 0, len(conf.Request))
	for _, c := range conf.Request {
		codes = append(codes, dhcpv4.GenericOptionCode(c))
	}
	mods := []dhcpv4.Modifier{
		dhcpv4.WithOption(dhcpv4.OptClientIdentifier([]byte(id))),
		dhcpv4.WithRequestedOptions(codes...),
	}
	for code, v := range providedValues(conf, cniArgs) {
		mods = append(mods, dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(code), []byte(v)))
	}
	if d.opts.Broadcast {
		mods = append(mods, dhcpv4.WithBroadcast(true))
	}
	return mods
}

// acquire4 runs DHCPv4 DORA on the attachment's interface, retrying with a
// growing wait (at most ResendMax) until ctx ends.
func (d *daemon) acquire4(ctx context.Context, rec *record, conf *Config) (*nclient4.Lease, error) {
	wait := 2 * time.Second
	var lastErr error
	for {
		l, err := d.exchange4(ctx, rec, conf, nil, func(c *nclient4.Client, mods []dhcpv4.Modifier) (*nclient4.Lease, error) {
			return c.Request(ctx, mods...)
		})
		if err == nil {
			return l, nil
		}
		if errors.Is(err, errGone) {
			return nil, err
		}
		lastErr = err
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("no DHCPv4 lease on %q in %s: %w", rec.IfName, rec.Netns, lastErr)
		case <-t.C:
		}
		wait = min(2*wait, d.opts.ResendMax)
	}
}

func (d *daemon) exchange4(ctx context.Context, rec *record, conf *Config, src net.IP, fn func(*nclient4.Client, []dhcpv4.Modifier) (*nclient4.Lease, error)) (*nclient4.Lease, error) {
	c, err := d.client4(rec.Netns, rec.IfName, src)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	defer cancel()
	return fn(c, d.modifiers4(conf, rec.ClientID, rec.CNIArgs))
}

// times4 returns when the lease must be renewed (T1), rebound (T2) and when
// it expires, as the server set them (RFC 2131 defaults otherwise).
func times4(ack *dhcpv4.DHCPv4, at time.Time) (t1, t2, exp time.Time) {
	lt := ack.IPAddressLeaseTime(time.Hour)
	if lt >= time.Duration(0xffffffff)*time.Second {
		far := at.Add(100 * 365 * 24 * time.Hour) // infinite lease
		return far, far, far
	}
	r1 := ack.IPAddressRenewalTime(lt / 2)
	r2 := ack.IPAddressRebindingTime(lt * 7 / 8)
	return at.Add(r1), at.Add(r2), at.Add(lt)
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

// result4 turns an ACK into the result's address and routes, as upstream:
// classless static routes (121) when the server sent any, since RFC 3442
// says a client then ignores the static routes (33) and the router (3);
// otherwise option 33's routes and a default route through the router.
func result4(ack *dhcpv4.DHCPv4, priority int) (*current.IPConfig, []*types.Route) {
	mask := ack.SubnetMask()
	if mask == nil {
		mask = ack.YourIPAddr.DefaultMask()
	}
	ip := &current.IPConfig{Address: net.IPNet{IP: ack.YourIPAddr.To4(), Mask: mask}}
	var router net.IP
	if rs := ack.Router(); len(rs) > 0 {
		router = rs[0].To4()
		ip.Gateway = router
	}
	var routes []*types.Route
	add := func(dst net.IPNet, gw net.IP) {
		r := &types.Route{Dst: dst, GW: gw}
		if gw == nil || gw.IsUnspecified() {
			// RFC 3442: router 0.0.0.0 means the destination is on-link.
			r.GW = nil
			scope := int(netlink.SCOPE_LINK)
			r.Scope = &scope
		}
		if priority > 0 {
			r.Priority = priority
		}
		routes = append(routes, r)
	}
	if csr := ack.ClasslessStaticRoute(); len(csr) > 0 {
		for _, r := range csr {
			add(*r.Dest, r.Router.To4())
		}
		return ip, routes
	}
	if raw := ack.GetOneOption(dhcpv4.OptionStaticRoutingTable); len(raw)%8 == 0 {
		for i := 0; i+8 <= len(raw); i += 8 {
			// Option 33 destinations are classful (RFC 2132 5.8).
			dst := net.IP(raw[i : i+4])
			mask := dst.DefaultMask()
			add(net.IPNet{IP: dst.Mask(mask), Mask: mask}, net.IP(raw[i+4:i+8]))
		}
	}
	if router != nil {
		add(net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}, router)
	}
	return ip, routes
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

func (l *lease) refresh4(ctx context.Context, now time.Time) error {
	l.mu.Lock()
	cur, at, lost := l.v4, l.v4At, l.lost
	l.mu.Unlock()
	t1, _, exp := times4(cur.ACK, at)
	if !lost && now.Before(t1) {
		return nil
	}
	if !lost && now.After(exp) {
		lost = true
	}
	var next *nclient4.Lease
	var err error
	if lost {
		next, err = l.d.exchange4(ctx, l.rec, l.conf, nil, func(c *nclient4.Client, mods []dhcpv4.Modifier) (*nclient4.Lease, error) {
			return c.Request(ctx, append(mods, dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(cur.ACK.YourIPAddr)))...)
		})
	} else {
		// A renewal before T2 and a rebinding after it are the same REQUEST
		// here: nclient4 sends it to the broadcast address, which reaches
		// the leasing server and any other.
		next, err = l.d.exchange4(ctx, l.rec, l.conf, cur.ACK.YourIPAddr, func(c *nclient4.Client, mods []dhcpv4.Modifier) (*nclient4.Lease, error) {
			return c.Renew(ctx, cur, mods...)
		})
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		var nak *nclient4.ErrNak
		if errors.As(err, &nak) || time.Now().After(exp) {
			l.lost = true
		}
		return err
	}
	if !next.ACK.YourIPAddr.Equal(cur.ACK.YourIPAddr) {
		// The pod keeps the address it was configured with; a new one
		// cannot be applied from here, so the lease stays lost.
		l.lost = true
		return fmt.Errorf("server offered %s, the attachment has %s", next.ACK.YourIPAddr, cur.ACK.YourIPAddr)
	}
	l.v4, l.v4At, l.lost = next, time.Now(), false
	return l.persist()
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
