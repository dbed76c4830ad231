package netfilter

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
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

// retryPause is the longest pause between two reads; the pause grows from
// 1 ms towards it.
const retryPause = 32 * time.Millisecond

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
func consistent[T any](read func() (T, error)) (T, error) {
	deadline := time.Now().Add(readBudget)
	pause := time.Millisecond
	for {
		before, err := nftGeneration()
		if err != nil {
			var zero T
			return zero, err
		}
		v, err := read()
		if err != nil {
			return v, err
		}
		after, err := nftGeneration()
		if err != nil {
			return v, err
		}
		if before == after {
			return v, nil
		}
		if time.Now().After(deadline) {
			return v, fmt.Errorf("%w for %s", errRulesetBusy, readBudget)
		}
		// Retrying at once mostly meets the same burst of commits again
		// (the other plugins of this batch of pods): wait a random part of
		// a growing pause, so that retries spread out and the writers,
		// which finish, get ahead.
		time.Sleep(rand.N(pause) + time.Millisecond/4)
		pause = min(2*pause, retryPause)
	}
}

// nftGeneration returns the nftables ruleset generation ID of the calling
// thread's network namespace (NFT_MSG_GETGEN); every commit bumps it.
func nftGeneration() (uint32, error) {
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, nil)
	if err != nil {
		return 0, fmt.Errorf("nftables netlink: %w", nftUnsupported(err))
	}
	defer c.Close()
	req := netlink.Message{
		Header: netlink.Header{
			Type:  netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETGEN),
			Flags: netlink.Request,
		},
		// struct nfgenmsg: family AF_UNSPEC, version NFNETLINK_V0, res_id 0.
		Data: []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0},
	}
	msgs, err := c.Execute(req)
	if err != nil {
		return 0, fmt.Errorf("read nftables generation: %w", nftUnsupported(err))
	}
	for _, m := range msgs {
		if len(m.Data) < 4 {
			continue
		}
		attrs, err := netlink.UnmarshalAttributes(m.Data[4:])
		if err != nil {
			return 0, fmt.Errorf("parse nftables generation: %w", err)
		}
		for _, a := range attrs {
			if a.Type == unix.NFTA_GEN_ID && len(a.Data) == 4 {
				return binary.BigEndian.Uint32(a.Data), nil
			}
		}
	}
	return 0, errors.New("read nftables generation: no NFTA_GEN_ID in reply")
}
