package nftnl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// readBudget bounds how long a read retries while other writers keep
// changing the ruleset under it. Every commit to any table of the
// namespace (iptables-nft's included) changes the generation, so with many
// pods added at once on a loaded node a read can lose many times in a row:
// 2 s was not enough for 8 parallel DELs at load 20 (tests/parallel).
const readBudget = 20 * time.Second

// errRulesetBusy is returned when the ruleset changed during every read
// within readBudget.
var errRulesetBusy = errors.New("nftables ruleset kept changing while it was read")

// consistent runs read until the nftables generation ID is the same before
// and after it, so what read saw is one whole ruleset.
//
// The kernel marks a dump that a concurrent commit interrupted with
// NLM_F_DUMP_INTR and carries on, possibly skipping rules; google/nftables
// drops that flag. Without this check, a Teardown racing another plugin's
// commit can miss its own rule and report success (seen with 8 parallel
// attachments in the tests).
//
// The check is sound because a commit bumps the generation before it makes
// its changes visible (nf_tables_commit: "bump generation counter,
// invalidate any dump in progress", then the gencursor flip): a dump that
// saw any of a commit's changes is followed by a generation read that sees
// its bump.
//
// Between two tries nothing sleeps: after a read that lost, the reader
// joins the nftables multicast group, and from then on, after each read
// that lost, waits for the NFT_MSG_NEWGEN notification of the last commit
// that raced it. That is sent when the commit has finished, so the retry
// starts behind the writers it lost to rather than in the middle of them.
// The first retry starts at once: the group is joined only once a read
// has lost (a socket more, and closing one costs; see conn.go), and a
// notification sent before the join is not heard.
func Consistent[T any](read func() (T, error)) (T, error) {
	return consistentWithin(nil, readBudget, read)
}

// consistentOn is consistent asking for generations on nl, a socket the
// caller has open anyway (see nftConn), rather than the shared one.
func ConsistentOn[T any](nl *netlink.Conn, read func() (T, error)) (T, error) {
	return consistentWithin(nl, readBudget, read)
}

// consistentWithin is consistent with the budget given; nl as for
// consistentOn, nil for the shared socket.
func consistentWithin[T any](nl *netlink.Conn, budget time.Duration, read func() (T, error)) (T, error) {
	var zero T
	deadline := time.Now().Add(budget)
	w, err := watchGenerations(nl)
	if err != nil {
		return zero, err
	}
	defer w.close()
	before, err := w.generation()
	if err != nil {
		return zero, err
	}
	for {
		v, err := read()
		if err != nil {
			return v, err
		}
		after, err := w.generation()
		if err != nil {
			return v, err
		}
		if before == after {
			return v, nil
		}
		if w.sub == nil {
			// Joined before the next generation read: it hears every
			// commit that can race the next try.
			if err := w.subscribe(); err != nil {
				return v, err
			}
			if after, err = w.generation(); err != nil {
				return v, err
			}
		} else {
			err = w.waitFor(after, deadline)
			if errors.Is(err, os.ErrDeadlineExceeded) || err == nil && time.Now().After(deadline) {
				return v, fmt.Errorf("%w for %s", errRulesetBusy, budget)
			}
			if err != nil {
				return v, err
			}
		}
		if time.Now().After(deadline) {
			return v, fmt.Errorf("%w for %s", errRulesetBusy, budget)
		}
		// Generation after was current before the next try starts: a
		// commit that races that try bumps it.
		before = after
	}
}

// genWatch is what consistent needs of nfnetlink: a socket for
// NFT_MSG_GETGEN requests (the process's shared one, see requestConn) and,
// once a read has lost, one subscribed to NFNLGRP_NFTABLES. (Replies to
// requests cannot share a socket with notifications: netlink.Conn.Execute
// would take a notification for its reply.)
type genWatch struct {
	req, sub *netlink.Conn
	done     func()
}

// watchGenerations asks on nl or, when nil, on the request socket of the
// calling thread's network namespace.
func watchGenerations(nl *netlink.Conn) (*genWatch, error) {
	if nl != nil {
		return &genWatch{req: nl, done: func() {}}, nil
	}
	req, done, err := RequestConn()
	if err != nil {
		return nil, err
	}
	return &genWatch{req: req, done: done}, nil
}

// subscribe opens the notification socket in the calling thread's network
// namespace and joins the nftables group.
func (w *genWatch) subscribe() error {
	sub, err := netlink.Dial(unix.NETLINK_NETFILTER, nil)
	if err != nil {
		return fmt.Errorf("nftables netlink: %w", NftUnsupported(err))
	}
	if err := sub.JoinGroup(unix.NFNLGRP_NFTABLES); err != nil {
		_ = sub.Close() // best effort: nothing was read or sent on it
		return fmt.Errorf("join nftables notification group: %w", NftUnsupported(err))
	}
	w.sub = sub
	return nil
}

func (w *genWatch) close() {
	w.done()
	if w.sub != nil {
		_ = w.sub.Close() // best effort: a read-only socket, nothing to flush
	}
}

// waitFor returns once the notification that generation gen is committed
// has arrived, or with an error wrapping os.ErrDeadlineExceeded at
// deadline. Notifications of earlier commits are skipped.
//
// If the socket's queue overflowed (ENOBUFS), the notification may be
// lost; waitFor then returns at once. That only costs a retry that may
// lose again: consistency rests on the generation reads, not on this wait.
func (w *genWatch) waitFor(gen uint32, deadline time.Time) error {
	if err := w.sub.SetReadDeadline(deadline); err != nil {
		return fmt.Errorf("wait for nftables generation %d: %w", gen, err)
	}
	for {
		msgs, err := w.sub.Receive()
		if errors.Is(err, unix.ENOBUFS) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("wait for nftables generation %d: %w", gen, err)
		}
		for _, m := range msgs {
			if m.Header.Type != netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_NEWGEN) {
				continue
			}
			// The generation wraps (skipping 0): compare as serial numbers.
			if g, ok := genID(m); ok && int32(g-gen) >= 0 {
				return nil
			}
		}
	}
}

// generation returns the nftables ruleset generation ID of the namespace
// the watch was opened in (NFT_MSG_GETGEN); every commit bumps it.
func (w *genWatch) generation() (uint32, error) {
	req := netlink.Message{
		Header: netlink.Header{
			Type:  netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETGEN),
			Flags: netlink.Request,
		},
		// struct nfgenmsg: family AF_UNSPEC, version NFNETLINK_V0, res_id 0.
		Data: []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0},
	}
	msgs, err := w.req.Execute(req)
	if err != nil {
		return 0, fmt.Errorf("read nftables generation: %w", NftUnsupported(err))
	}
	for _, m := range msgs {
		if g, ok := genID(m); ok {
			return g, nil
		}
	}
	return 0, errors.New("read nftables generation: no NFTA_GEN_ID in reply")
}

// genID returns the NFTA_GEN_ID of a NEWGEN message (a reply to GETGEN or
// a notification).
func genID(m netlink.Message) (uint32, bool) {
	if len(m.Data) < 4 {
		return 0, false
	}
	attrs, err := netlink.UnmarshalAttributes(m.Data[4:]) // after struct nfgenmsg
	if err != nil {
		return 0, false
	}
	for _, a := range attrs {
		if a.Type == unix.NFTA_GEN_ID && len(a.Data) == 4 {
			return binary.BigEndian.Uint32(a.Data), true
		}
	}
	return 0, false
}
