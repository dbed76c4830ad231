package dhcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/mdlayher/packet"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

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
	return retryAcquire(ctx, d, rec, "DHCPv4", func() (*nclient4.Lease, error) {
		return d.exchange4(ctx, rec, conf, nil, func(c *nclient4.Client, mods []dhcpv4.Modifier) (*nclient4.Lease, error) {
			return c.Request(ctx, mods...)
		})
	})
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
