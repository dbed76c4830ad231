// Package ns opens network namespaces by path and runs code inside them.
//
// A network namespace belongs to an OS thread, not to a goroutine, so every
// function that enters a namespace does so on a fresh goroutine locked to its
// thread. When the thread cannot be put back into the namespace it came from,
// it is left locked, and the Go runtime ends it with the goroutine: a thread in
// the wrong namespace is never handed back to the scheduler.
//
// So every thread the scheduler hands out is in the plugin's host namespace,
// and code outside Do (a plugin's main goroutine) is in the host namespace
// on whichever thread it runs. New threads are cloned from the thread that
// needs one, but one locked to its goroutine (inside Do) has the runtime's
// template thread clone it, and the first LockOSThread starts that thread
// while Do's thread is still in the host namespace.
//
// The main thread is not locked: with the main goroutine locked to it, each
// Do had to hand the processor to another thread and back (two wake-ups,
// and on a busy node each waits for a CPU), and the runtime cloned the
// template thread before main even in a VERSION exec. A locked goroutine
// that ends on the main thread wedges that thread instead of ending it; the
// process goes on on the others, and nothing here reads /proc/self/ns
// (ns paths are per thread: /proc/<pid>/task/<tid>, /proc/thread-self;
// and a thread's own namespace is best opened through a socket, see
// socketNS).
package ns

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/filelock"
	"github.com/cniforge/plugins/pkg/result"
)

// ErrNotNetNS is returned by Open for a path that exists but is not a network
// namespace (not an nsfs file, or a namespace of another kind).
var ErrNotNetNS = errors.New("not a network namespace")

// NetNS is an open network namespace. The zero value is not usable.
type NetNS struct {
	file *os.File
	path string
}

// Open opens the network namespace at nsPath (a bind mount such as
// /run/netns/x, or /proc/<pid>/ns/net) and checks that it is one.
// A missing path yields an error for which errors.Is(err, os.ErrNotExist).
func Open(nsPath string) (*NetNS, error) {
	f, err := openBlocking(nsPath)
	if err != nil {
		return nil, fmt.Errorf("open netns %s: %w", nsPath, err)
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("statfs netns %s: %w", nsPath, err)
	}
	// /proc/<pid>/ns/net lives on procfs on old kernels, on nsfs on new ones.
	if st.Type != unix.NSFS_MAGIC && st.Type != unix.PROC_SUPER_MAGIC {
		f.Close()
		return nil, fmt.Errorf("%s: %w", nsPath, ErrNotNetNS)
	}
	// NS_GET_NSTYPE (Linux 4.11) tells a network namespace from the other
	// kinds. A kernel too old for it still puts namespaces on nsfs, which
	// then is the best evidence there is; an ordinary procfs file fails it.
	kind, err := unix.IoctlRetInt(int(f.Fd()), unix.NS_GET_NSTYPE)
	switch {
	case err != nil && st.Type != unix.NSFS_MAGIC:
		f.Close()
		return nil, fmt.Errorf("%s: %w", nsPath, ErrNotNetNS)
	case err == nil && kind != unix.CLONE_NEWNET:
		f.Close()
		return nil, fmt.Errorf("%s: %w (namespace type %#x)", nsPath, ErrNotNetNS, kind)
	}
	return &NetNS{file: f, path: nsPath}, nil
}

// openBlocking opens path read-only as an *os.File that stays out of Go's
// network poller. os.Open would try to register the nsfs file with epoll
// (the kernel refuses it), and in a plugin process that first attempt
// makes the poller itself: an epoll instance, an eventfd and four fcntl
// calls on every exec, for a file nobody polls.
func openBlocking(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// FromFd opens the network namespace that the open descriptor fd refers to
// (such as another NetNS's Fd()), for code handed only the descriptor. It
// checks it as Open does; fd stays the caller's, and the caller closes the
// result.
func FromFd(fd int) (*NetNS, error) {
	return Open(fmt.Sprintf("/proc/self/fd/%d", fd))
}

// Current opens the network namespace of the calling thread. Outside Do
// that is the plugin's host namespace, whichever thread the goroutine is on
// (see the package doc). Its Path names the thread's file under /proc,
// for messages; it is not opened (see socketNS).
func Current() (*NetNS, error) {
	path := threadNSPath()
	if f, err := socketNS(path); err == nil {
		return &NetNS{file: f, path: path}, nil
	}
	return Open(path)
}

// socketNS opens the calling thread's network namespace as the namespace
// of a socket made on the thread (SIOCGSKNS, Linux 4.9), as a file named
// path; it fails where the caller lacks CAP_NET_ADMIN over the namespace,
// and callers then open path.
//
// Not through /proc: a thread's ns file there
// (/proc/<pid>/task/<tid>/ns/net, /proc/thread-self/ns/net) leaves proc
// entries that the kernel walks and drops when the process is reaped
// (proc_invalidate_siblings_dcache), in the parent: the runtime, or
// cniforge check, paid 0.1-0.9 ms for each plugin it ran on a busy node,
// against 0.01 ms without; near nothing either way on a quiet one (issue
// 24).
func socketNS(path string) (*os.File, error) {
	s, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(s)
	fd, err := unix.IoctlRetInt(s, unix.SIOCGSKNS) // close-on-exec, as the kernel opens it
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

func threadNSPath() string {
	return fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
}

// Path returns the path the namespace was opened from.
func (n *NetNS) Path() string { return n.path }

// Fd returns the namespace's file descriptor, valid until Close.
func (n *NetNS) Fd() uintptr { return n.file.Fd() }

// Close releases the namespace handle.
func (n *NetNS) Close() error { return n.file.Close() }

// Lock takes an exclusive flock on the namespace file, waiting for the
// current holder, so that plugin commands in one namespace that pick and
// fill shared state there (sbr's tables, a VRF) run in turn. The returned
// func releases it; closing n releases it too.
func (n *NetNS) Lock() (func(), error) {
	return filelock.Hold(int(n.Fd()), n.Path())
}

// Bound is an open namespace with a netlink handle bound to it (H), as a
// DEL opens the container's.
type Bound struct {
	*NetNS
	H *netlink.Handle
}

// OpenForDel opens the namespace at nsPath and a netlink handle in it, for
// a DEL. An empty nsPath, a missing path and a path that is no longer a
// network namespace (what a runtime leaves after unmounting one) are
// (nil, nil): the namespace is gone, and what the plugin made in it with
// it. Close releases both.
func OpenForDel(nsPath string) (*Bound, error) {
	if nsPath == "" {
		return nil, nil
	}
	n, err := Open(nsPath)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, ErrNotNetNS) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	h, err := n.Handle()
	if err != nil {
		n.Close()
		return nil, err
	}
	return &Bound{NetNS: n, H: h}, nil
}

// OpenLocked opens the namespace at nsPath, takes its Lock and a netlink
// handle in it: what a DEL that takes turns with the plugin's other
// commands in the namespace (sbr, vrf) runs with. An empty nsPath, or one
// that no longer opens, is (nil, nil): the namespace is gone, and what the
// plugin made in it with it. Close releases all of it.
func OpenLocked(nsPath string) (*Bound, error) {
	if nsPath == "" {
		return nil, nil
	}
	n, err := Open(nsPath)
	if err != nil {
		return nil, nil // gone
	}
	if _, err := n.Lock(); err != nil {
		n.Close()
		return nil, err
	}
	h, err := n.Handle()
	if err != nil {
		n.Close() // releases the lock too
		return nil, err
	}
	return &Bound{NetNS: n, H: h}, nil
}

// Close closes the handle and the namespace (which releases its Lock).
func (b *Bound) Close() error {
	b.H.Close()
	return b.NetNS.Close()
}

// Do runs fn with the network namespace n entered, on a thread of its own,
// and returns fn's error. The caller's thread is never switched. A panic
// in fn is returned as a *PanicError, after the thread has left n: on a
// goroutine of Do's own it would otherwise end the process, past every
// recover and rollback of the caller.
func (n *NetNS) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		origin, err := socketNS(threadNSPath())
		if err != nil {
			origin, err = openBlocking(threadNSPath())
		}
		if err != nil {
			errc <- fmt.Errorf("open current netns: %w", err)
			return // the thread is still clean: let it go
		}
		defer origin.Close()
		if err := unix.Setns(int(n.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter netns %s: %w", n.path, err)
			return
		}
		ferr := callRecovered(n.path, fn)
		if err := unix.Setns(int(origin.Fd()), unix.CLONE_NEWNET); err != nil {
			// The thread stays locked and dies with this goroutine.
			errc <- errors.Join(ferr, fmt.Errorf("leave netns %s: %w", n.path, err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// PanicError is what Do returns when its function panicked.
type PanicError struct {
	NSPath string
	Value  any    // what fn panicked with
	Stack  []byte // the goroutine's stack at the panic, for a log
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("panic in netns %s: %v", e.NSPath, e.Value)
}

// Unwrap returns the value panicked with when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

func callRecovered(nsPath string, fn func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{NSPath: nsPath, Value: v, Stack: debug.Stack()}
		}
	}()
	return fn()
}

// Handle returns a netlink handle for rtnetlink (links, addresses, routes,
// rules, qdiscs) whose socket lives in n, usable from any thread. The
// caller closes it with Close. For conntrack, see NetfilterHandle.
func (n *NetNS) Handle() (*netlink.Handle, error) {
	return n.handle(unix.NETLINK_ROUTE)
}

// NetfilterHandle returns a netlink handle for nfnetlink (conntrack) whose
// socket lives in n.
//
// It is apart from Handle because closing a bound NETLINK_NETFILTER socket
// is not free: the kernel then takes the namespace's nf_tables commit
// mutex and waits for pending nf_tables cleanup work (an RCU grace period
// after a deletion), once per socket. netlink.NewHandle() without
// families opens one (and an XFRM one) in every handle; with many pods
// added at once that wait, behind other pods' commits, was a large part of
// every plugin exec.
func (n *NetNS) NetfilterHandle() (*netlink.Handle, error) {
	return n.handle(unix.NETLINK_NETFILTER)
}

func (n *NetNS) handle(family int) (*netlink.Handle, error) {
	// The sockets are made inside Do (a socket belongs to the namespace it
	// was created in, for life) rather than with netlink.NewHandleAt, which
	// switches the calling thread and unlocks it even when switching back
	// failed.
	var h *netlink.Handle
	err := n.Do(func() (err error) {
		h, err = netlink.NewHandle(family)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netlink handle in %s: %w", n.path, err)
	}
	return h, nil
}

// Same reports whether n and other are the same namespace.
func (n *NetNS) Same(other *NetNS) (bool, error) {
	var a, b unix.Stat_t
	if err := unix.Fstat(int(n.Fd()), &a); err != nil {
		return false, err
	}
	if err := unix.Fstat(int(other.Fd()), &b); err != nil {
		return false, err
	}
	return a.Dev == b.Dev && a.Ino == b.Ino, nil
}

// OpenHost opens the plugin's host namespace, the calling thread's (every
// thread outside Do is in it; see the package doc), with a netlink
// handle bound to it. The caller closes both (h.Close, n.Close).
func OpenHost() (*NetNS, *netlink.Handle, error) {
	n, err := Current()
	if err != nil {
		return nil, nil, fmt.Errorf("open host netns: %w", err)
	}
	h, err := HostHandle()
	if err != nil {
		n.Close()
		return nil, nil, err
	}
	return n, h, nil
}

// RefuseOwn refuses (code 8) a CNI_NETNS, nsPath, that is the calling
// thread's network namespace (the plugin's own), unless override
// (CNI_NETNS_OVERRIDE) is "1" or "true": the runtime then means it. An
// empty nsPath or one that cannot be opened passes; the command reports it
// where it matters (DEL treats a namespace that is gone as done).
//
// skel makes the same check only after ADD or DEL ran, so a plugin that
// does its work outside the namespace (an IPAM plugin) would reserve an
// address, print the result, and then fail with a second JSON document.
func RefuseOwn(nsPath, override string) error {
	if nsPath == "" {
		return nil
	}
	if o := strings.ToLower(override); o == "1" || o == "true" {
		return nil
	}
	// Two stats, no opens: a namespace is its nsfs inode, and a path that
	// is no namespace has an inode of its own, never the plugin's netns'.
	var cont unix.Stat_t
	if err := unix.Stat(nsPath, &cont); err != nil {
		return nil
	}
	same, ownPath, err := isOwn(&cont)
	if err != nil {
		return result.InvalidNetNS(fmt.Errorf("stat the plugin's own netns %s: %w", ownPath, err))
	}
	if same {
		// Not naming own's path: it holds the process and thread IDs, so
		// the message would differ between runs of the same call.
		return result.InvalidNetNS(fmt.Errorf("CNI_NETNS %s is the plugin's own network namespace", nsPath))
	}
	return nil
}

// IsOwn reports whether n is the calling thread's network namespace, the
// plugin's own outside Do (see the package doc), and names the path it
// compared n with. It stats that path rather than opening it.
func (n *NetNS) IsOwn() (same bool, ownPath string, err error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(n.Fd()), &st); err != nil {
		return false, threadNSPath(), fmt.Errorf("stat netns %s: %w", n.path, err)
	}
	return isOwn(&st)
}

func isOwn(st *unix.Stat_t) (bool, string, error) {
	ownPath := threadNSPath()
	var own unix.Stat_t
	if f, err := socketNS(ownPath); err == nil {
		// Not a stat of ownPath: see socketNS.
		err = unix.Fstat(int(f.Fd()), &own)
		_ = f.Close() // best effort: read-only, nothing written through it
		if err != nil {
			return false, ownPath, err
		}
	} else if err := unix.Stat(ownPath, &own); err != nil {
		return false, ownPath, err
	}
	return st.Dev == own.Dev && st.Ino == own.Ino, ownPath, nil
}

// HostHandle returns a netlink handle (rtnetlink) whose socket lives in the
// plugin's host namespace. Call it outside Do: the calling thread is then
// in the host namespace (see the package doc), so the socket is made right
// here, without Do's thread of its own and its two setns calls.
func HostHandle() (*netlink.Handle, error) {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink handle in the host netns: %w", err)
	}
	return h, nil
}

// OpenContainer opens the container namespace a CNI command names in
// CNI_NETNS, with a netlink handle bound to it. Its errors carry the CNI
// code the runtime should see: 4 when nsPath is empty, 8 when it is not a
// usable network namespace. The caller closes both (h.Close, n.Close).
func OpenContainer(nsPath string) (*NetNS, *netlink.Handle, error) {
	if nsPath == "" {
		return nil, nil, result.InvalidEnv(errors.New("CNI_NETNS: missing"))
	}
	n, err := Open(nsPath)
	if err != nil {
		return nil, nil, result.InvalidNetNS(err)
	}
	h, err := n.Handle()
	if err != nil {
		n.Close()
		return nil, nil, result.InvalidNetNS(err)
	}
	return n, h, nil
}
