package dhcp

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"time"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/dhcpv6/nclient6"
	"github.com/insomniacslk/dhcp/iana"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/ns"
)

// lease6 is a DHCPv6 IA_NA lease: the server's Reply and when it came.
type lease6 struct {
	reply *dhcpv6.Message
	at    time.Time
	addr  net.IP
	t1d   time.Duration // renew after
	t2d   time.Duration // rebind after
	valid time.Duration // the address's valid lifetime
}

// duid6 is the attachment's DHCPv6 client DUID: a DUID-UUID (RFC 6355)
// made from upstream's client ID, so it stays the same across daemon
// restarts and a retried ADD gets the same address back.
func duid6(id string) dhcpv6.DUID {
	sum := sha256.Sum256([]byte(id))
	var u [16]byte
	copy(u[:], sum[:16])
	return &dhcpv6.DUIDUUID{UUID: u}
}

func iaid6(id string) [4]byte {
	sum := sha256.Sum256([]byte("iaid/" + id))
	var a [4]byte
	copy(a[:], sum[:4])
	return a
}

func newLease6(reply *dhcpv6.Message, at time.Time) (*lease6, error) {
	ia := reply.Options.OneIANA()
	if ia == nil {
		return nil, errors.New("DHCPv6 reply carries no IA_NA")
	}
	if st := ia.Options.Status(); st != nil && st.StatusCode != iana.StatusSuccess {
		return nil, fmt.Errorf("DHCPv6 server: %s %s", st.StatusCode, st.StatusMessage)
	}
	a := ia.Options.OneAddress()
	if a == nil || a.IPv6Addr == nil {
		return nil, errors.New("DHCPv6 reply carries no address in its IA_NA")
	}
	l := &lease6{reply: reply, at: at, addr: a.IPv6Addr, t1d: ia.T1, t2d: ia.T2, valid: a.ValidLifetime}
	// RFC 8415 21.4: T1/T2 of 0 leave the times to the client.
	if l.t1d == 0 {
		l.t1d = a.PreferredLifetime / 2
	}
	if l.t2d == 0 {
		l.t2d = a.PreferredLifetime * 4 / 5
	}
	return l, nil
}

func lease6FromRecord(r *v6Rec) (*lease6, error) {
	m, err := dhcpv6.MessageFromBytes(r.Reply)
	if err != nil {
		return nil, fmt.Errorf("DHCPv6 reply: %w", err)
	}
	return newLease6(m, r.Acquired)
}

func (l *lease6) toRecord() *v6Rec { return &v6Rec{Reply: l.reply.ToBytes(), Acquired: l.at} }

func (l *lease6) t1() time.Time { return l.at.Add(l.t1d) }

func (l *lease6) expiry() time.Time {
	if l.valid >= time.Duration(0xffffffff)*time.Second {
		return l.at.Add(100 * 365 * 24 * time.Hour) // infinite
	}
	return l.at.Add(l.valid)
}

// ipConfig is the lease as a result address. DHCPv6 carries no prefix
// length, so the address is a /128 (RFC 8415 section 21.6): the on-link
// prefix and the default route come from router advertisements.
func (l *lease6) ipConfig() *current.IPConfig {
	return &current.IPConfig{Address: net.IPNet{IP: l.addr, Mask: net.CIDRMask(128, 128)}}
}

// waitLinkLocal waits (netlink events, until ctx ends) for ifName to have
// a link-local address that finished duplicate address detection: the
// DHCPv6 client sends from it.
func (d *daemon) waitLinkLocal(ctx context.Context, netns, ifName string) error {
	n, err := ns.Open(d.nsPath(netns))
	if err != nil {
		return fmt.Errorf("%w: %v", errGone, err)
	}
	defer n.Close()
	h, err := n.Handle()
	if err != nil {
		return err
	}
	defer h.Close()
	link, err := h.LinkByName(ifName)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return fmt.Errorf("%w: interface %q not in %s", errGone, ifName, netns)
		}
		return err
	}
	updates := make(chan netlink.AddrUpdate, 16)
	done := make(chan struct{})
	defer close(done)
	// Subscribed before the first look, so no change falls in between.
	if err := n.Do(func() error { return netlink.AddrSubscribe(updates, done) }); err != nil {
		return fmt.Errorf("watch addresses in %s: %w", netns, err)
	}
	for {
		addrs, err := h.AddrList(link, netlink.FAMILY_V6)
		if err != nil {
			return fmt.Errorf("addresses of %q in %s: %w", ifName, netns, err)
		}
		for _, a := range addrs {
			if a.IP.IsLinkLocalUnicast() && a.Flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED) == 0 {
				return nil
			}
		}
		select {
		case <-updates:
		case <-ctx.Done():
			return fmt.Errorf("no usable IPv6 link-local address on %q in %s: %w", ifName, netns, ctx.Err())
		}
	}
}

// exchange6 runs fn with a DHCPv6 client on the attachment's interface.
func (d *daemon) exchange6(ctx context.Context, rec *record, fn func(context.Context, *nclient6.Client) (*dhcpv6.Message, error)) (*dhcpv6.Message, error) {
	ctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	defer cancel()
	if err := d.waitLinkLocal(ctx, rec.Netns, rec.IfName); err != nil {
		return nil, err
	}
	var c *nclient6.Client
	err := d.inNS(rec.Netns, rec.IfName, func() (err error) {
		c, err = nclient6.New(rec.IfName, nclient6.WithTimeout(d.opts.Timeout/3), nclient6.WithRetry(3))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("DHCPv6 client on %q in %s: %w", rec.IfName, rec.Netns, err)
	}
	defer c.Close()
	return fn(ctx, c)
}

// acquire6 runs Solicit/Advertise/Request/Reply, retrying as acquire4.
func (d *daemon) acquire6(ctx context.Context, rec *record, conf *Config) (*lease6, error) {
	mods := []dhcpv6.Modifier{dhcpv6.WithClientID(duid6(rec.ClientID)), dhcpv6.WithIAID(iaid6(rec.ClientID))}
	return retryAcquire(ctx, d, rec, "DHCPv6", func() (*lease6, error) {
		reply, err := d.exchange6(ctx, rec, func(ctx context.Context, c *nclient6.Client) (*dhcpv6.Message, error) {
			adv, err := c.Solicit(ctx, mods...)
			if err != nil {
				return nil, err
			}
			return c.Request(ctx, adv, mods...)
		})
		if err != nil {
			return nil, err
		}
		return newLease6(reply, time.Now()) // never errGone: a bad reply is tried again
	})
}

// message6 builds a Renew, Rebind or Release for the lease (RFC 8415 18.2):
// our client ID, the IA_NA as the server gave it, and for Renew and
// Release the server's ID.
func (l *lease6) message6(id string, t dhcpv6.MessageType) (*dhcpv6.Message, error) {
	m, err := dhcpv6.NewMessage()
	if err != nil {
		return nil, err
	}
	m.MessageType = t
	m.AddOption(dhcpv6.OptClientID(duid6(id)))
	if t != dhcpv6.MessageTypeRebind {
		sid := l.reply.GetOneOption(dhcpv6.OptionServerID)
		if sid == nil {
			return nil, errors.New("DHCPv6 reply carries no server ID")
		}
		m.AddOption(sid)
	}
	m.AddOption(dhcpv6.OptElapsedTime(0))
	m.AddOption(l.reply.Options.OneIANA())
	return m, nil
}

// t1v6 is when the DHCPv6 lease is due for renewal (caller holds l.mu).
func (l *lease) t1v6() time.Time {
	t := l.v6.t1()
	if c := l.d.opts.v6T1Cap; c > 0 && l.v6.at.Add(c).Before(t) {
		t = l.v6.at.Add(c)
	}
	return t
}

func (l *lease) refresh6(ctx context.Context, now time.Time) error {
	l.mu.Lock()
	cur, lost, t1 := l.v6, l.lost, l.t1v6()
	l.mu.Unlock()
	if !lost && now.Before(t1) {
		return nil
	}
	var reply *dhcpv6.Message
	var err error
	if lost || now.After(cur.expiry()) {
		var fresh *lease6
		fresh, err = l.d.acquire6(ctx, l.rec, l.conf)
		if err == nil {
			reply = fresh.reply
		}
	} else {
		kind := dhcpv6.MessageTypeRenew
		if now.After(cur.at.Add(cur.t2d)) {
			kind = dhcpv6.MessageTypeRebind
		}
		reply, err = l.d.exchange6(ctx, l.rec, func(ctx context.Context, c *nclient6.Client) (*dhcpv6.Message, error) {
			m, err := cur.message6(l.id, kind)
			if err != nil {
				return nil, err
			}
			return c.SendAndRead(ctx, nclient6.AllDHCPRelayAgentsAndServers, m, nclient6.IsMessageType(dhcpv6.MessageTypeReply))
		})
	}
	var next *lease6
	if err == nil {
		next, err = newLease6(reply, time.Now())
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		if time.Now().After(cur.expiry()) {
			l.lost = true
		}
		return fmt.Errorf("DHCPv6 renewal of %s: %w", cur.addr, err)
	}
	if !next.addr.Equal(cur.addr) {
		l.lost = true
		return fmt.Errorf("DHCPv6 server gave %s, the attachment has %s", next.addr, cur.addr)
	}
	l.v6 = next
	if l.v4 == nil {
		l.lost = false
	}
	return l.persist()
}

// release6 sends a Release and waits (at most Timeout) for the Reply.
// Caller holds l.mu.
func (l *lease) release6() error {
	_, err := l.d.exchange6(l.d.ctx, l.rec, func(ctx context.Context, c *nclient6.Client) (*dhcpv6.Message, error) {
		m, err := l.v6.message6(l.id, dhcpv6.MessageTypeRelease)
		if err != nil {
			return nil, err
		}
		return c.SendAndRead(ctx, nclient6.AllDHCPRelayAgentsAndServers, m, nclient6.IsMessageType(dhcpv6.MessageTypeReply))
	})
	if err != nil {
		return fmt.Errorf("DHCPv6 release of %s: %w", l.v6.addr, err)
	}
	return nil
}
