package attach

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"runtime/debug"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ipam"
	"github.com/cniforge/plugins/pkg/owner"
	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/pkg/result"
)

// Hooks change how a plugin runs; the zero value is production.
type Hooks struct {
	// AfterStep, when set, runs at each Attachment.Step of ADD. An error
	// it returns (or a panic) fails ADD at that point as a kernel error
	// would; a test can also change the kernel in it first, as a
	// concurrent ADD would, before the undos run.
	AfterStep func(step string) error
}

// Plugin is a plugin written on the frame: its parse function, its own
// kernel steps per verb, and what it shares with the others (IPAM,
// masquerade) switched on by its config type. Descriptor turns it into a
// plugin.Plugin.
type Plugin[C Conf] struct {
	Name     string
	Summary  string
	Versions version.PluginInfo // nil: plugin.AllVersions

	// Parse decodes, defaults and validates stdin and CNI_ARGS for every
	// verb (start with Decode). It must be pure: no netlink, no netns, no
	// files; errors carry their CNI code. It must not parse prevResult.
	Parse func(args *skel.CmdArgs) (C, error)

	// Lenient, optional, is DEL's parse when Parse refuses the config as
	// invalid (code 7): it decodes and defaults what DEL needs to find
	// the attachment's state and skips the checks of values DEL does not
	// use. A config edited between ADD and DEL ("mode": "evil") must not
	// make the attachment impossible to remove; the frame logs Parse's
	// error and goes on. Errors of Lenient itself stop DEL.
	Lenient func(args *skel.CmdArgs) (C, error)

	// Add makes the attachment after the container namespace passed the
	// own-namespace guard. Push the undo of every change onto a.Undo right
	// after it succeeded, and call a.Step after each step. The runner
	// prints the result it returns in the config's cniVersion.
	Add func(a *Attachment, c C) (types.Result, error)

	// Del returns the errors of its independent steps, each "already gone"
	// being success; it must not need prevResult or the container
	// namespace. Before it, the frame tears down masquerade (configs
	// embedding Masq), and after it, it releases IPAM (configs with ipam;
	// an IPAM type that releases on the interface, dhcp, before it).
	Del func(a *Attachment, c C) []error

	// Check compares the kernel with prev after IPAM's CHECK passed. prev
	// is never nil: the frame refuses a CHECK without prevResult (code 7),
	// unless PrevOptional is set.
	Check func(a *Attachment, c C, prev *current.Result) error
	// PrevOptional lets CHECK run without prevResult (loopback, whose
	// state does not depend on what ADD reported).
	PrevOptional bool
	// Chained marks a plugin that adjusts the attachment a plugin before
	// it in the conflist made (tuning, sbr, bandwidth, vrf): ADD refuses a
	// config without prevResult (code 7) and a prevResult that does not
	// decode (code 6) before anything is opened or changed, and hands it
	// to Add as Attachment.Prev, converted to the current version.
	Chained bool

	// GC, optional, collects the plugin's own state of network c.Name that
	// belongs to none of keep; the frame forwards GC to IPAM and collects
	// masquerade rules first. It runs without container ID, netns or
	// ifname.
	GC func(a *Attachment, c C, keep []owner.Owner) []error

	// Status, optional, reports what the plugin itself needs; the frame
	// forwards STATUS to IPAM after it.
	Status func(a *Attachment, c C) error

	// Masq is the masquerade the frame tears down on DEL, collects on GC
	// and probes on STATUS for a config that embeds Masq (bridge and ptp
	// pass pkg/attach/masquerade's Frame). The frame links no netfilter
	// code itself, so a plugin without masquerade links none.
	Masq Masquerade
}

// Descriptor returns the plugin.Plugin that runs p with hooks.
func (p Plugin[C]) Descriptor(hooks Hooks) plugin.Plugin {
	vers := p.Versions
	if vers == nil {
		vers = plugin.AllVersions
	}
	var zero C
	if _, ok := any(zero).(masqer); ok && p.Masq == nil {
		// A programming error every test of the plugin shows: DEL would
		// leave the masquerade rules ADD made.
		panic(fmt.Sprintf("attach: %s's config embeds Masq but Plugin.Masq is nil", p.Name))
	}
	r := &runner[C]{p: p, hooks: hooks}
	return plugin.Plugin{
		Name:     p.Name,
		Summary:  p.Summary,
		Versions: vers,
		Funcs: skel.CNIFuncs{
			Add:    guarded(r.add),
			Del:    guarded(r.del),
			Check:  guarded(r.check),
			GC:     guarded(r.gc),
			Status: guarded(r.status),
		},
	}
}

// guarded answers a panic that escapes a command (in Parse, say, before
// there is anything to undo) with code 999 instead of a stack on stderr and
// no answer on stdout. Each runner recovers its own panics first, to undo.
func guarded(fn func(*skel.CmdArgs) error) func(*skel.CmdArgs) error {
	return func(args *skel.CmdArgs) (err error) {
		defer func() {
			if v := recover(); v != nil {
				err = panicError(v, nil)
			}
		}()
		return fn(args)
	}
}

type runner[C Conf] struct {
	p     Plugin[C]
	hooks Hooks
}

// start parses the config and makes the attachment (nothing opened yet).
func (r *runner[C]) start(cmd string, args *skel.CmdArgs) (*Attachment, C, error) {
	c, err := r.p.Parse(args)
	var invalid error
	if err != nil && cmd == "DEL" && r.p.Lenient != nil && result.Code(err) == types.ErrInvalidNetworkConfig {
		if lc, lerr := r.p.Lenient(args); lerr == nil {
			c, invalid, err = lc, err, nil
		}
	}
	if err != nil {
		return nil, c, err
	}
	log := plugin.Logger(cmd, args)
	if invalid != nil {
		log.Warn("config no longer valid; DEL removes what it can identify", "err", invalid)
	}
	return newAttachment(args, c.Common(), r.hooks, log), c, nil
}

// recovered turns a panic into CNI error 999 carrying the panic's message;
// the stack goes to the log (stderr), never to stdout. Defer it itself:
// recover works only when called by the deferred function.
func recovered(err *error, log *slog.Logger) {
	if v := recover(); v != nil {
		*err = panicError(v, log)
	}
}

func panicError(v any, log *slog.Logger) error {
	if log != nil {
		log.Error("panic", "value", fmt.Sprint(v))
		log.Debug("panic", "stack", string(debug.Stack()))
	}
	return types.NewError(types.ErrInternal, fmt.Sprintf("panic: %v", v), "")
}

func (r *runner[C]) add(args *skel.CmdArgs) (err error) {
	a, c, err := r.start("ADD", args)
	if err != nil {
		return err
	}
	defer a.Close()
	// Deferred after Close, so it runs before it: the undos still have
	// the namespaces. A panic is recovered first, then undone like an error.
	defer func() {
		if v := recover(); v != nil {
			err = panicError(v, a.Log)
		}
		if err != nil {
			a.Undo.Run(a.Log) // a panicking undo step is an error of its own there
		}
	}()
	if r.p.Chained {
		if a.Prev, err = requirePrev(a.Conf, r.p.Name); err != nil {
			return err
		}
	}
	if err := findIPAM(a.Conf, args.Path); err != nil {
		return err
	}
	if a.Conf.HasIPAM() {
		// Its start overlaps the steps before IPAMAdd; it acts only then.
		a.ipamPre = ipam.Prestart(a.Conf.IPAM.Type, "ADD")
		defer a.ipamPre.Cancel()
	}
	if _, _, err := a.Container(); err != nil {
		return err
	}
	if r.p.Chained {
		if err := chainedIface(a, a.Prev); err != nil {
			return err
		}
	}
	res, err := r.p.Add(a, c)
	if err != nil {
		return err
	}
	return result.Print(res, a.Conf.CNIVersion)
}

// requirePrev parses the prevResult a chained plugin's ADD needs: code 7
// when there is none, code 6 when it does not decode.
func requirePrev(c *NetConf, name string) (*current.Result, error) {
	prev, err := c.Prev()
	if err != nil {
		return nil, err
	}
	if prev == nil {
		return nil, result.InvalidConfig(fmt.Errorf("prevResult: missing (%s is a chained plugin: it adjusts the interface a plugin before it in the conflist made)", name))
	}
	return prev, nil
}

// chainedIface refuses (code 7), before a chained plugin changes anything,
// an attachment whose interface is not there to adjust: prevResult puts
// CNI_IFNAME in another sandbox than CNI_NETNS, or CNI_NETNS has no link
// of that name. Without it the plugin fails half-way with "link not found"
// (code 999), as upstream's do.
func chainedIface(a *Attachment, prev *current.Result) error {
	name, netns := a.Args.IfName, a.Args.Netns
	elsewhere := ""
	var ifaces []*current.Interface
	if prev != nil {
		ifaces = prev.Interfaces
	}
	for _, iface := range ifaces {
		if iface.Name != name || iface.Sandbox == "" {
			continue
		}
		if iface.Sandbox == netns {
			elsewhere = ""
			break
		}
		elsewhere = iface.Sandbox
	}
	if elsewhere != "" {
		return result.InvalidConfig(fmt.Errorf("prevResult: interface %q is in sandbox %q, not in CNI_NETNS %q", name, elsewhere, netns))
	}
	_, h, err := a.Container()
	if err != nil {
		return err
	}
	if _, err := h.LinkByName(name); err != nil {
		var notFound netlink.LinkNotFoundError
		if errors.As(err, &notFound) {
			return result.InvalidConfig(fmt.Errorf("CNI_IFNAME: no interface %q in CNI_NETNS %s to adjust (prevResult names the interface a plugin before this one made)", name, netns))
		}
		return fmt.Errorf("look up %q in %s: %w", name, netns, err)
	}
	return nil
}

// findIPAM refuses, before any change, an IPAM type that is not in
// CNI_PATH: a config problem (code 7), not an internal error.
func findIPAM(c *NetConf, cniPath string) error {
	if !c.HasIPAM() {
		return nil
	}
	if _, err := invoke.FindInPath(c.IPAM.Type, filepath.SplitList(cniPath)); err != nil {
		return result.InvalidConfig(fmt.Errorf("ipam.type: %q not found in CNI_PATH %q", c.IPAM.Type, cniPath))
	}
	return nil
}

func (r *runner[C]) del(args *skel.CmdArgs) (err error) {
	a, c, err := r.start("DEL", args)
	if err != nil {
		return err
	}
	defer a.Close()
	defer recovered(&err, a.Log)
	if err := a.guardDel(); err != nil {
		return err
	}
	releaseFirst := a.Conf.HasIPAM() && releasesOnInterface(a.Conf.IPAM.Type)
	ctx := context.TODO()
	if a.Conf.HasIPAM() && !releaseFirst {
		// Its start overlaps the teardown (a link deletion waits for an
		// RCU grace period); it releases only when handed its config.
		pre := ipam.Prestart(a.Conf.IPAM.Type, "DEL")
		defer pre.Cancel()
		ctx = ipam.WithPrestarted(ctx, pre)
	}
	var errs []error
	if releaseFirst {
		errs = append(errs, releaseIPAM(ctx, a)...)
	}
	// Whatever ipMasq says now, and on both backends: the ADD may have run
	// with another ipMasq or ipMasqBackend, or be the other suite's. It
	// needs no addresses and no container namespace, and shares nothing
	// with the plugin's own steps, so it runs beside them: their link
	// deletion waits out an RCU grace period, its iptables a process.
	var masqDone <-chan []error
	if _, ok := any(c).(masqer); ok && r.p.Masq != nil {
		masqDone = a.Beside(func() error {
			if err := r.p.Masq.TeardownAll(a.Owner()); err != nil {
				return fmt.Errorf("masquerade: %w", err)
			}
			return nil
		})
	}
	if r.p.Del != nil {
		errs = append(errs, safeSteps(a.Log, func() []error { return r.p.Del(a, c) })...)
	}
	if masqDone != nil {
		errs = append(errs, <-masqDone...)
	}
	// Otherwise last, as ADD reserved first: a released address must not
	// meet what is left of this attachment.
	if a.Conf.HasIPAM() && !releaseFirst {
		errs = append(errs, releaseIPAM(ctx, a)...)
	}
	return errors.Join(errs...)
}

// Beside runs fn in the plugin's host namespace on a thread of its own,
// beside the caller, and delivers its error (or its panic, as an error)
// on the returned channel once it is done; the caller receives from it
// before returning. The namespace is entered explicitly: a new thread is
// in the process's namespace, which is not the plugin's host namespace
// when the frame runs inside a test's. For independent DEL steps, so that
// one's kernel wait (a link deletion's RCU grace period) hides the other.
func (a *Attachment) Beside(fn func() error) <-chan []error {
	done := make(chan []error, 1)
	hostNS, _, err := a.Host()
	if err != nil {
		done <- []error{err}
		close(done)
		return done
	}
	go func() {
		// Recovered inside Do, so that the thread leaves the namespace
		// it entered before the error is delivered.
		err := hostNS.Do(func() (err error) {
			defer recovered(&err, a.Log)
			return fn()
		})
		if err != nil {
			done <- []error{err}
		}
		close(done)
	}()
	return done
}

func releaseIPAM(ctx context.Context, a *Attachment) []error {
	if err := findIPAM(a.Conf, a.Args.Path); err != nil {
		return []error{err} // code 7, naming the type: nothing to release with
	}
	if err := ipam.Del(ctx, a.Conf.IPAM.Type, a.Conf.Raw); err != nil {
		return []error{fmt.Errorf("ipam %s DEL: %w", a.Conf.IPAM.Type, err)}
	}
	return nil
}

// releasesOnInterface says whether an IPAM type releases its address by
// talking on the container interface, so DEL must run it while that
// interface still exists (as upstream, which releases IPAM first for every
// type): the dhcp daemon sends its RELEASE from the container interface,
// inside the container namespace, and sends none once the interface is
// gone (the server would keep the lease until it expires).
func releasesOnInterface(ipamType string) bool { return ipamType == "dhcp" }

// safeSteps runs fn, turning a panic into one error so that the steps
// after it (IPAM release) still run.
func safeSteps(log *slog.Logger, fn func() []error) (errs []error) {
	defer func() {
		if v := recover(); v != nil {
			errs = append(errs, panicError(v, log))
		}
	}()
	return fn()
}

func (r *runner[C]) check(args *skel.CmdArgs) (err error) {
	a, c, err := r.start("CHECK", args)
	if err != nil {
		return err
	}
	defer a.Close()
	defer recovered(&err, a.Log)
	prev, err := a.Conf.Prev()
	if err != nil {
		return err
	}
	if prev == nil && !r.p.PrevOptional {
		return result.InvalidConfig(errors.New("prevResult: missing (CHECK compares the kernel with the result of ADD)"))
	}
	if err := findIPAM(a.Conf, args.Path); err != nil {
		return err
	}
	if !a.Conf.HasIPAM() {
		return r.checkOwn(a, c, prev)
	}
	checkIPAM := func(ctx context.Context) error {
		if err := ipam.Check(ctx, a.Conf.IPAM.Type, a.Conf.Raw); err != nil {
			return fmt.Errorf("ipam %s CHECK: %w", a.Conf.IPAM.Type, err)
		}
		return nil
	}
	pre := ipam.Prestart(a.Conf.IPAM.Type, "CHECK")
	if pre == nil {
		if err := checkIPAM(context.TODO()); err != nil {
			return err
		}
		return r.checkOwn(a, c, prev)
	}
	// Both only read, so the delegate's CHECK (its own process) runs
	// while the plugin compares the kernel; its error still comes first.
	defer pre.Cancel()
	ipamErr := make(chan error, 1)
	go func() {
		var err error
		defer func() { ipamErr <- err }()
		defer recovered(&err, a.Log) // a goroutine's panic passes every other recover
		err = checkIPAM(ipam.WithPrestarted(context.TODO(), pre))
	}()
	ownErr := r.checkOwn(a, c, prev)
	if err := <-ipamErr; err != nil {
		return err
	}
	return ownErr
}

// checkOwn is CHECK's part in the container namespace: the plugin's Check.
func (r *runner[C]) checkOwn(a *Attachment, c C, prev *current.Result) error {
	if _, _, err := a.Container(); err != nil {
		return err
	}
	if r.p.Chained {
		if err := chainedIface(a, prev); err != nil {
			return err
		}
	}
	if r.p.Check == nil {
		return nil
	}
	return r.p.Check(a, c, prev)
}

func (r *runner[C]) gc(args *skel.CmdArgs) (err error) {
	a, c, err := r.start("GC", args)
	if err != nil {
		return err
	}
	defer a.Close()
	defer recovered(&err, a.Log)
	valid, err := result.GCAttachments(args.StdinData)
	if err != nil {
		return err
	}
	var errs []error
	if a.Conf.HasIPAM() {
		if err := ipam.GC(context.TODO(), a.Conf.IPAM.Type, a.Conf.Raw); err != nil {
			errs = append(errs, fmt.Errorf("ipam %s GC: %w", a.Conf.IPAM.Type, err))
		}
	}
	keep := owner.Owners(a.Conf.Name, valid)
	if _, ok := any(c).(masqer); ok && r.p.Masq != nil {
		if err := r.p.Masq.GCAll(a.Conf.Name, keep); err != nil {
			errs = append(errs, fmt.Errorf("masquerade GC: %w", err))
		}
	}
	if r.p.GC != nil {
		errs = append(errs, safeSteps(a.Log, func() []error { return r.p.GC(a, c, keep) })...)
	}
	return errors.Join(errs...)
}

func (r *runner[C]) status(args *skel.CmdArgs) (err error) {
	a, c, err := r.start("STATUS", args)
	if err != nil {
		return err
	}
	defer a.Close()
	defer recovered(&err, a.Log)
	// The chosen masquerade backend must work here, or every ADD would
	// fail: code 50 (plugin not available).
	if m, ok := any(c).(masqer); ok && m.MasqConf().IPMasq && r.p.Masq != nil {
		if err := r.p.Masq.Usable(m.MasqConf().Backend()); err != nil {
			return result.Unavailable(fmt.Errorf("ipMasqBackend %q: %w", m.MasqConf().Backend(), err))
		}
	}
	if r.p.Status != nil {
		if err := r.p.Status(a, c); err != nil {
			return err
		}
	}
	if !a.Conf.HasIPAM() {
		return nil
	}
	if err := ipam.Status(context.TODO(), a.Conf.IPAM.Type, a.Conf.Raw); err != nil {
		return fmt.Errorf("ipam %s STATUS: %w", a.Conf.IPAM.Type, err)
	}
	return nil
}

// Addrs returns the addresses of res as IPNets (address and prefix).
func Addrs(ipcs []*current.IPConfig) []*net.IPNet {
	out := make([]*net.IPNet, 0, len(ipcs))
	for _, ipc := range ipcs {
		out = append(out, &net.IPNet{IP: ipc.Address.IP, Mask: ipc.Address.Mask})
	}
	return out
}

// IPs returns the addresses of ipcs without their prefix.
func IPs(ipcs []*current.IPConfig) []net.IP {
	out := make([]net.IP, 0, len(ipcs))
	for _, ipc := range ipcs {
		out = append(out, ipc.Address.IP)
	}
	return out
}
