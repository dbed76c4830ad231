package dhcp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/cniforge/plugins/pkg/result"
)

// Service is the daemon's RPC service, registered as "DHCP". Allocate and
// Release are upstream's methods with upstream's arguments, so a plugin of
// either suite can talk to a daemon of the other; Check and GC are ours.
type Service struct {
	d *daemon
}

// Allocate acquires a lease for the attachment in args (the plugin's skel
// arguments; the netconf travels in StdinData), persists it and returns it.
// An attachment that already holds a live lease gets it back unchanged, so
// an ADD retried after a daemon restart returns the same address.
//
// call ends when the plugin that asked is gone (killed by a runtime's
// timeout: the runtime saw the ADD fail and will not DEL what it never
// got). Allocate then gives up, and releases a lease it acquired for that
// plugin rather than renew it for no one.
func (s *Service) Allocate(call context.Context, args *skel.CmdArgs, res *current.Result) (err error) {
	d := s.d
	if hook := d.opts.allocated; hook != nil {
		defer func() { hook(err) }()
	}
	conf, err := parseConfig(args.StdinData)
	if err != nil {
		return err
	}
	if args.Netns == "" {
		return errors.New("CNI_NETNS: missing")
	}
	id := clientID(args.ContainerID, conf.Name, args.IfName)
	defer d.beginAlloc(id, conf.Name)() // before the lock: GC waits for this call
	unlock := d.lock(id)
	defer unlock()
	if hook := d.opts.beforeAcquire; hook != nil {
		hook(call)
	}
	if call.Err() != nil {
		return errCallerGone(id)
	}

	if old := d.get(id); old != nil {
		if old.rec.Netns == args.Netns && old.live(time.Now()) == nil {
			*res = *old.result()
			return nil
		}
		// A lost lease, or the same ID in another netns: start afresh.
		old.stop()
		if err := old.release(); err != nil {
			d.log.Warn("release replaced lease", "clientID", id, "err", err)
		}
		d.set(id, nil)
		if err := removeRecord(d.opts.StateDir, id); err != nil {
			return err
		}
	}

	rec := &record{
		ClientID: id, ContainerID: args.ContainerID, Network: conf.Name, IfName: args.IfName,
		Netns: args.Netns, CNIArgs: args.Args, Stdin: args.StdinData,
	}
	l := &lease{d: d, id: id, conf: conf, rec: rec}
	ctx, cancel := context.WithTimeout(d.ctx, d.opts.ResendTimeout)
	defer cancel()
	// A caller gone mid-exchange does not cut the exchange short: the
	// server may already have committed the lease it is about to ACK, and
	// only a finished exchange knows what to release (a kill mid-ADD then
	// DEL found a dnsmasq lease left behind, tests/killadd).
	if conf.IPv4 {
		v4, err := d.acquire4(ctx, rec, conf)
		if err != nil {
			return err
		}
		l.v4, l.v4At = v4, time.Now()
	}
	if conf.IPv6 {
		v6, err := d.acquire6(ctx, rec, conf)
		if err != nil {
			_ = l.release() // best effort: the v4 lease would otherwise sit until it expires
			return err
		}
		l.v6 = v6
	}
	if hook := d.opts.afterAcquire; hook != nil {
		hook(call)
	}
	if call.Err() != nil {
		if err := l.release(); err != nil {
			d.log.Warn("release lease of a caller that is gone", "clientID", id, "err", err)
		}
		return errCallerGone(id)
	}
	l.mu.Lock()
	err = l.persist()
	l.mu.Unlock()
	if err != nil {
		_ = l.release() // best effort, as above
		return fmt.Errorf("persist lease for %s in %s: %w", id, d.opts.StateDir, err)
	}
	d.set(id, l)
	d.start(l)
	d.log.Info("lease acquired", "clientID", id)
	*res = *l.result()
	return nil
}

func errCallerGone(id string) error {
	return fmt.Errorf("lease for %s: the plugin that asked for it is gone; nothing kept", id)
}

// Release sends a RELEASE for the attachment's lease and forgets it. No
// lease, or a netns that is gone, is success.
func (s *Service) Release(args *skel.CmdArgs, reply *struct{}) error {
	d := s.d
	conf, err := parseReleaseConfig(args.StdinData)
	if err != nil {
		return err
	}
	return d.release(clientID(args.ContainerID, conf.Name, args.IfName))
}

func (d *daemon) release(id string) error {
	unlock := d.lock(id)
	defer unlock()
	l := d.get(id)
	if l == nil {
		return removeRecord(d.opts.StateDir, id) // nothing held; a leftover file goes too
	}
	l.stop()
	relErr := l.release()
	if relErr != nil {
		d.log.Warn("release", "clientID", id, "err", relErr)
	}
	d.set(id, nil)
	d.log.Info("lease released", "clientID", id)
	// The lease is forgotten even when the RELEASE could not be sent: the
	// server then lets it expire, as it would for a vanished client.
	return removeRecord(d.opts.StateDir, id)
}

// Check returns the attachment's lease when the daemon holds it live, and
// an error naming what is wrong otherwise.
func (s *Service) Check(args *skel.CmdArgs, res *current.Result) error {
	conf, err := parseConfig(args.StdinData)
	if err != nil {
		return err
	}
	id := clientID(args.ContainerID, conf.Name, args.IfName)
	l := s.d.get(id)
	if l == nil {
		return fmt.Errorf("daemon holds no lease for %s", id)
	}
	if err := l.live(time.Now()); err != nil {
		return err
	}
	*res = *l.result()
	return nil
}

// GC releases every lease of the network in args.StdinData whose attachment
// is not in its cni.dev/valid-attachments list, including a lease an
// Allocate under way is about to store.
func (s *Service) GC(args *skel.CmdArgs, reply *struct{}) error {
	d := s.d
	conf, err := parseConfig(args.StdinData)
	if err != nil {
		return err
	}
	valid, err := result.GCAttachments(args.StdinData)
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, a := range valid {
		keep[clientID(a.ContainerID, conf.Name, a.IfName)] = true
	}
	// An attachment whose Allocate is under way counts too: release takes
	// its lock, so it waits for the call to store its lease, then releases
	// it. Its plugin was killed mid-ADD, or is about to hand the runtime an
	// attachment the runtime no longer lists.
	var errs []error
	for _, id := range d.ids(conf.Name) {
		if keep[id] {
			continue
		}
		if err := d.release(id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
