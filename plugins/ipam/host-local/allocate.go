package hostlocal

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"

	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/cniforge/plugins/pkg/rollback"
)

// errExhausted marks "no free address in a range set".
var errExhausted = errors.New("no IP addresses available")

// allocate reserves one address per range set for (id, ifName) and returns
// them as result IPs. It leaves every reservation or none.
func allocate(conf *Config, s *store, id, ifName string, log *slog.Logger) (ips []*current.IPConfig, err error) {
	ix, err := s.loadIndex()
	if err != nil {
		return nil, err
	}
	exact, legacy, _, err := ix.lookupOwned(id, ifName)
	if err != nil {
		return nil, err
	}
	// One address per range set per attachment: a second ADD without a DEL
	// is refused, as upstream refuses it. The index only says where to look;
	// each address counts only if its reservation file still names us.
	var held []netip.Addr
	for _, a := range append(exact, legacy...) {
		o, err := s.readOwner(a)
		if err != nil || !o.holds(id, ifName) {
			continue // stale entry: released, or never written (a crash)
		}
		if set := conf.rangeSetFor(a); set >= 0 {
			return nil, fmt.Errorf("%s is already reserved for container %s ifname %s in range set %s; DEL it first",
				a, id, ifName, conf.RangeSets[set])
		}
		if !o.Legacy {
			held = append(held, a) // outside today's ranges; keep it recorded for DEL
		}
	}

	if err := ix.invalidate(); err != nil {
		return nil, err
	}
	var undo rollback.Stack
	defer func() {
		if err != nil && len(undo.Run(log)) > 0 {
			return // the stamp stays removed: the next command rebuilds from the files
		}
		// The folder and the index agree again: what we claimed is recorded,
		// or was released.
		if cerr := ix.commit(); cerr != nil && err == nil {
			err = cerr
		}
	}()

	for i, set := range conf.RangeSets {
		a, err := reserveIn(conf, s, owner{ID: id, IfName: ifName}, i, log)
		if err != nil {
			return nil, err
		}
		undo.Push("release "+a.String(), func() error { return s.remove(a) })
		s.step("reserve " + a.String())
		held = append(held, a)
		r, _ := set.rangeFor(a)
		ips = append(ips, &current.IPConfig{
			Address: net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(r.Subnet.Bits(), a.BitLen())},
			Gateway: r.Gateway.AsSlice(),
		})
	}
	if err := ix.put(id, ifName, held); err != nil {
		return nil, err
	}
	s.step("index")
	undo = rollback.Stack{} // every step succeeded; nothing to undo
	return ips, nil
}

// reserveIn reserves the requested address of range set i, or the next
// free one round-robin from last_reserved_ip.<i>, and moves the cursor.
func reserveIn(conf *Config, s *store, o owner, i int, log *slog.Logger) (netip.Addr, error) {
	set := conf.RangeSets[i]
	// A temp file per reservation: two reservations sharing one inode
	// would change together if anything rewrote one in place.
	cl, err := s.newClaimer(o)
	if err != nil {
		return netip.Addr{}, err
	}
	defer func() {
		if cerr := cl.close(); cerr != nil {
			log.Warn("temp file left behind; the next rebuild removes it", "err", cerr)
		}
	}()

	var picked netip.Addr
	if want, ok := conf.Requested[i]; ok {
		got, err := cl.claim(want)
		if err != nil {
			return netip.Addr{}, err
		}
		if !got {
			return netip.Addr{}, fmt.Errorf("requested IP address %s is not available in range set %s", want, set)
		}
		picked = want
		s.step("claim " + want.String())
	} else {
		var claimErr error
		set.candidates(s.lastReserved(i), func(a netip.Addr) bool {
			got, err := cl.claim(a)
			if err != nil {
				claimErr = err
				return false
			}
			if got {
				picked = a
			}
			return !got
		})
		if claimErr != nil {
			return netip.Addr{}, claimErr
		}
		if !picked.IsValid() {
			return netip.Addr{}, fmt.Errorf("%w in range set %s", errExhausted, set)
		}
		s.step("claim " + picked.String())
	}
	// Upstream records requested addresses as the cursor too.
	if err := s.setLastReserved(i, picked); err != nil {
		if rerr := s.remove(picked); rerr != nil {
			log.Warn("reservation left behind; DEL or GC releases it", "err", rerr)
		}
		return netip.Addr{}, err
	}
	return picked, nil
}

// hasFree reports whether range set i has an address nobody holds. It only
// looks (no lock, no claim): STATUS is advisory.
func hasFree(conf *Config, s *store, i int) (bool, error) {
	var (
		free    bool
		statErr error
	)
	conf.RangeSets[i].candidates(s.lastReserved(i), func(a netip.Addr) bool {
		taken, err := s.isReserved(a)
		if err != nil {
			statErr = err
			return false
		}
		free = !taken
		return taken
	})
	return free, statErr
}
