package netfilter

import (
	"fmt"
	"sync"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
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
// So the single requests this package sends itself (a generation, one
// chain) share one socket per network namespace for the life of the
// process; the process's exit closes it, once. nftables.Conn, which keeps
// batch state, still has one socket per change.

// maxRequestConns bounds the namespaces a process keeps a request socket
// in. A plugin exec works in one; a test process goes through many, and a
// socket keeps its namespace alive, so past the bound a request gets a
// socket of its own, closed after it.
const maxRequestConns = 8

var requestConns = struct {
	sync.Mutex
	byNS map[[2]uint64]*netlink.Conn
}{byNS: map[[2]uint64]*netlink.Conn{}}

// requestConn returns an nfnetlink socket in the calling thread's network
// namespace for single requests (netlink.Conn.Execute is safe for
// concurrent use), and the function to call when done with it: a no-op
// for the shared one.
func requestConn() (*netlink.Conn, func(), error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
		return nil, nil, fmt.Errorf("network namespace of this thread: %w", err)
	}
	key := [2]uint64{st.Dev, st.Ino}
	requestConns.Lock()
	defer requestConns.Unlock()
	if c := requestConns.byNS[key]; c != nil {
		return c, func() {}, nil
	}
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("nftables netlink: %w", nftUnsupported(err))
	}
	if len(requestConns.byNS) >= maxRequestConns {
		return c, func() { _ = c.Close() }, nil // best effort: requests only, nothing to flush
	}
	requestConns.byNS[key] = c
	return c, func() {}, nil
}
