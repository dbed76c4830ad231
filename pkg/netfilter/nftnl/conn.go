package nftnl

import (
	"fmt"
	"sync"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/ns"
)

// Closing a bound NETLINK_NETFILTER socket is not free: the kernel then
// takes the namespace's nf_tables commit mutex and waits for the pending
// nf_tables cleanup work, which waits out an RCU grace period after any
// commit (nft_rcv_nl_event, on NETLINK_URELEASE). With pods added and
// removed at once, every commit leaves such work, so each close held the
// mutex for a grace period while the other pods' commits, and their veth
// creations (nf_tables' netdev notifier takes the same mutex under the
// rtnl lock), queued behind it. A plugin exec used to close three to six
// of these sockets.
//
// So a process keeps one nftables connection per network namespace for
// its life (acquireNFT), and the process's exit closes it, once: the
// masquerade's changes and reads, iptables-nft's chains read and deleted
// over netlink, and the single requests this package sends itself (a
// generation, one chain or table) all go through it. Portmap's and the
// firewall's nftables backends still open one of their own per change.

// maxRequestConns bounds the namespaces a process keeps a connection in. A
// plugin exec works in one; a test process goes through many, and a socket
// keeps its namespace alive, so past the bound a caller gets a connection
// of its own, closed after it.
const maxRequestConns = 8

// sharedNFT is the connection of one namespace and the lock that gives it
// to one caller at a time: a change queues messages in it up to its Flush,
// and the single requests share its socket.
type sharedNFT struct {
	mu   sync.Mutex
	conn *NftConn // nil until opened, and after a failure dropped it
}

var sharedNFTs = struct {
	sync.Mutex
	byNS map[[2]uint64]*sharedNFT
}{byNS: map[[2]uint64]*sharedNFT{}}

// acquireNFT returns the process's nftables connection in the calling
// thread's network namespace, held for the caller alone, and the function
// that gives it back. release(failed) with failed true drops it (its batch
// may still hold what a failed change queued, its socket replies nobody
// read); the next caller opens another. A caller must not acquire it
// again before it has released it.
func AcquireNFT() (*NftConn, func(failed bool), error) {
	// Not a stat of /proc/thread-self/ns/net: see ns.Current.
	cur, err := ns.Current()
	if err != nil {
		return nil, nil, fmt.Errorf("network namespace of this thread: %w", err)
	}
	var st unix.Stat_t
	err = unix.Fstat(int(cur.Fd()), &st)
	_ = cur.Close() // best effort: read-only, nothing written through it
	if err != nil {
		return nil, nil, fmt.Errorf("network namespace of this thread: %w", err)
	}
	key := [2]uint64{uint64(st.Dev), st.Ino} // Dev is uint32 on mips64
	sharedNFTs.Lock()
	s := sharedNFTs.byNS[key]
	if s == nil && len(sharedNFTs.byNS) < maxRequestConns {
		s = &sharedNFT{}
		sharedNFTs.byNS[key] = s
	}
	sharedNFTs.Unlock()
	if s == nil {
		c, err := OpenNFT()
		if err != nil {
			return nil, nil, err
		}
		return c, func(bool) { _ = c.CloseLasting() }, nil // best effort: a change's errors came from Flush
	}
	s.mu.Lock()
	if s.conn == nil {
		c, err := OpenNFT()
		if err != nil {
			s.mu.Unlock()
			return nil, nil, err
		}
		s.conn = c
	}
	c := s.conn
	return c, func(failed bool) {
		if failed {
			_ = c.CloseLasting() // best effort: dropped for what it may hold
			s.conn = nil
		}
		s.mu.Unlock()
	}, nil
}

// withNFT runs fn with the process's connection (see acquireNFT); an error
// of fn, or a panic, drops it.
func WithNFT(fn func(c *NftConn) error) (err error) {
	c, release, err := AcquireNFT()
	if err != nil {
		return err
	}
	failed := true
	defer func() { release(failed) }()
	err = fn(c)
	failed = err != nil
	return err
}

// requestConn returns the socket of the process's connection in the
// calling thread's network namespace, for single requests, and the
// function to call when done with it. An error reply to a request is read
// whole, so it leaves the socket as it was.
func RequestConn() (*netlink.Conn, func(), error) {
	c, release, err := AcquireNFT()
	if err != nil {
		return nil, nil, err
	}
	return c.Nl, func() { release(false) }, nil
}
