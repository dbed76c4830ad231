package dhcp

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/cniforge/plugins/pkg/gobrpc"
)

// Daemon defaults, as upstream's flags.
const (
	DefaultStateDir      = "/var/lib/cni/dhcp"
	DefaultTimeout       = 10 * time.Second
	DefaultResendMax     = 62 * time.Second
	DefaultResendTimeout = 208 * time.Second
)

// Options configure the daemon. The zero value of a field means its default.
type Options struct {
	SocketPath    string        // unix socket to serve on
	PidFile       string        // written once the socket listens ("" = none)
	HostPrefix    string        // prefixed to every CNI_NETNS (daemon in a container)
	Broadcast     bool          // ask servers to broadcast their replies
	Timeout       time.Duration // one DHCP exchange (DORA, renew)
	ResendMax     time.Duration // longest wait between two tries
	ResendTimeout time.Duration // how long an ADD keeps trying to get a lease
	StateDir      string        // where leases are persisted
	// Listener, when set, is served instead of listening on SocketPath
	// (systemd socket activation).
	Listener net.Listener
	Log      *slog.Logger

	// v6T1Cap, test-only, renews DHCPv6 leases at most this long after
	// they were granted (dnsmasq's shortest DHCPv6 lease is 2 minutes, so
	// its T1 is at least 1). Zero (always, outside tests): the server's T1.
	v6T1Cap time.Duration
	// beforeAcquire, afterAcquire and allocated, test-only, run in
	// Allocate once it holds the attachment's lock and once it holds the
	// lease (with the call's context), and as it returns (with its error).
	beforeAcquire, afterAcquire func(ctx context.Context)
	allocated                   func(err error)
}

func (o *Options) defaults() {
	if o.SocketPath == "" {
		o.SocketPath = DefaultSocketPath
	}
	if o.StateDir == "" {
		o.StateDir = DefaultStateDir
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.ResendMax <= 0 {
		o.ResendMax = DefaultResendMax
	}
	if o.ResendTimeout <= 0 {
		o.ResendTimeout = DefaultResendTimeout
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// DaemonMain runs `dhcp daemon [flags]` with args (the flags, without
// "daemon") and returns the process exit code. getenv reads the process
// environment (only LISTEN_PID and LISTEN_FDS, for socket activation); it
// returns on SIGTERM or SIGINT via ctx.
func DaemonMain(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	fs := flag.NewFlagSet("dhcp daemon", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o Options
	var debug bool
	fs.StringVar(&o.SocketPath, "socketpath", DefaultSocketPath, "unix socket to serve the plugin on")
	fs.StringVar(&o.PidFile, "pidfile", "", "write the daemon's PID to this file")
	fs.StringVar(&o.HostPrefix, "hostprefix", "", "prefix to CNI_NETNS paths (daemon running in a container)")
	fs.BoolVar(&o.Broadcast, "broadcast", false, "ask DHCP servers to broadcast their replies")
	fs.DurationVar(&o.Timeout, "timeout", DefaultTimeout, "timeout of one DHCP exchange")
	fs.DurationVar(&o.ResendMax, "resendmax", DefaultResendMax, "longest wait between two DHCP tries")
	fs.DurationVar(&o.ResendTimeout, "resendtimeout", DefaultResendTimeout, "how long an ADD keeps trying to get a lease")
	fs.StringVar(&o.StateDir, "statedir", DefaultStateDir, "folder where leases are persisted")
	fs.BoolVar(&debug, "debug", false, "log every lease event")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	lvl := slog.LevelInfo
	if debug {
		lvl = slog.LevelDebug
	}
	o.Log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
	l, err := activationListener(getenv)
	if err != nil {
		fmt.Fprintln(stderr, "dhcp daemon:", err)
		return 1
	}
	o.Listener = l
	if err := Run(ctx, o); err != nil {
		fmt.Fprintln(stderr, "dhcp daemon:", err)
		return 1
	}
	return 0
}

// activationListener returns the socket systemd passed (LISTEN_FDS=1 for
// this PID, fd 3), or nil when the daemon was not socket-activated.
func activationListener(getenv func(string) string) (net.Listener, error) {
	if getenv("LISTEN_PID") != strconv.Itoa(os.Getpid()) {
		return nil, nil
	}
	n, err := strconv.Atoi(getenv("LISTEN_FDS"))
	if err != nil || n < 1 {
		return nil, nil
	}
	if n != 1 {
		return nil, fmt.Errorf("LISTEN_FDS=%d: want exactly one socket", n)
	}
	const firstFD = 3 // SD_LISTEN_FDS_START
	syscall.CloseOnExec(firstFD)
	l, err := net.FileListener(os.NewFile(firstFD, "systemd socket"))
	if err != nil {
		return nil, fmt.Errorf("socket from systemd (fd 3): %w", err)
	}
	return l, nil
}

// Run serves the plugin on o.SocketPath (or o.Listener) until ctx ends. It
// first resumes every lease persisted in o.StateDir. Leases outlive Run:
// they stay on disk, and the next Run renews them.
func Run(ctx context.Context, o Options) error {
	o.defaults()
	if err := os.MkdirAll(o.StateDir, 0o700); err != nil {
		return fmt.Errorf("state dir %s: %w", o.StateDir, err)
	}
	d := &daemon{opts: o, log: o.Log, leases: map[string]*lease{}, locks: map[string]*sync.Mutex{},
		pending: map[string]pendingAlloc{}}
	d.ctx, d.cancel = context.WithCancel(ctx)
	defer d.stopAll()

	l := o.Listener
	if l == nil {
		var err error
		if l, err = listenUnix(o.SocketPath); err != nil {
			return err
		}
	}
	defer l.Close()
	d.resume()

	srv := gobrpc.NewServer()
	srv.HeaderTimeout = 10 * time.Second // a connected client that never asks holds a goroutine only this long
	svc := &Service{d: d}
	for _, err := range []error{
		gobrpc.HandleContext(srv, "DHCP.Allocate", svc.Allocate),
		gobrpc.Handle(srv, "DHCP.Release", svc.Release),
		gobrpc.Handle(srv, "DHCP.Check", svc.Check),
		gobrpc.Handle(srv, "DHCP.GC", svc.GC),
	} {
		if err != nil {
			return err
		}
	}

	if o.PidFile != "" {
		if err := writeFileAtomic(o.PidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
			return fmt.Errorf("pidfile: %w", err)
		}
		defer os.Remove(o.PidFile)
	}
	d.log.Info("serving", "socket", l.Addr().String(), "statedir", o.StateDir)
	// Until ctx ends, which closes l and the connections still open (a
	// plugin mid-call sees the daemon go, as when the process exits).
	if err := srv.Serve(ctx, l); err != nil {
		return fmt.Errorf("serve %s: %w", l.Addr(), err)
	}
	return nil
}

// listenUnix listens on path. A socket file whose daemon is gone (a
// SIGKILLed daemon leaves one) is replaced; one a live daemon answers on
// is not.
func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("socket dir for %s: %w", path, err)
	}
	conn, err := net.DialTimeout("unix", path, 2*time.Second)
	switch {
	case err == nil:
		conn.Close()
		return nil, fmt.Errorf("%s: another daemon is serving on it", path)
	case errors.Is(err, syscall.ECONNREFUSED):
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return l, nil
}

// daemon holds the leases. Each attachment (client ID) has its own lock,
// so a slow DHCP server for one pod does not hold up another's ADD.
type daemon struct {
	opts   Options
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	leases map[string]*lease // by client ID
	locks  map[string]*sync.Mutex
	// pending counts the Allocate calls under way (waiting for the
	// attachment's lock or acquiring) by client ID, with their network.
	// The plugin that asked may be gone (a runtime's timeout SIGKILLs it;
	// the server runs the call to its end): GC must not miss the lease such a
	// call is about to store (issue 14, kills mid-ADD).
	pending map[string]pendingAlloc
	wg      sync.WaitGroup
}

type pendingAlloc struct {
	network string
	n       int
}

// beginAlloc records an Allocate of id in network under way; call the
// returned func when it ends.
func (d *daemon) beginAlloc(id, network string) func() {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.pending[id]
	p.network, p.n = network, p.n+1
	d.pending[id] = p
	return func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if p := d.pending[id]; p.n > 1 {
			p.n--
			d.pending[id] = p
		} else {
			delete(d.pending, id)
		}
	}
}

// ids lists the client IDs of network's leases and of its Allocate calls
// under way.
func (d *daemon) ids(network string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for id, l := range d.leases {
		if l.rec.Network == network {
			out = append(out, id)
		}
	}
	for id, p := range d.pending {
		if _, held := d.leases[id]; !held && p.network == network {
			out = append(out, id)
		}
	}
	return out
}

func (d *daemon) lock(id string) func() {
	d.mu.Lock()
	m := d.locks[id]
	if m == nil {
		m = &sync.Mutex{}
		d.locks[id] = m
	}
	d.mu.Unlock()
	m.Lock()
	return m.Unlock
}

func (d *daemon) get(id string) *lease {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.leases[id]
}

func (d *daemon) set(id string, l *lease) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if l == nil {
		delete(d.leases, id)
		return
	}
	d.leases[id] = l
}

// stopAll ends every lease's maintenance without releasing it.
func (d *daemon) stopAll() {
	d.cancel()
	d.wg.Wait()
}

// resume loads every persisted lease and starts renewing it.
func (d *daemon) resume() {
	recs, err := loadRecords(d.opts.StateDir)
	if err != nil {
		d.log.Error("load leases", "dir", d.opts.StateDir, "err", err)
	}
	for _, rec := range recs {
		l, err := leaseFromRecord(d, rec)
		if err != nil {
			d.log.Error("resume lease", "clientID", rec.ClientID, "err", err)
			continue
		}
		d.set(rec.ClientID, l)
		d.start(l)
		d.log.Info("resumed lease", "clientID", rec.ClientID)
	}
}
