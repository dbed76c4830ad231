package attach

import (
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

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

	// IPAM is the delegation to the IPAM plugin a config names, for a
	// plugin that takes its addresses from one (pass pkg/ipam's Frame):
	// the frame then finds it in CNI_PATH before ADD and CHECK, releases
	// on DEL and forwards GC and STATUS to it, and Attachment.IPAMAdd
	// runs its ADD. Nil: the plugin ignores an "ipam" key and links no
	// delegation.
	IPAM IPAM

	// Masq is the masquerade the frame tears down on DEL, collects on GC
	// and probes on STATUS for a config that embeds Masq (bridge and ptp
	// pass pkg/attach/masquerade's Frame). The frame links no netfilter
	// code itself, so a plugin without masquerade links none.
	Masq Masquerade
}

// Descriptor returns the plugin.Plugin that runs p with hooks.
//
// Every plugin package builds its descriptor at init, and the multicall
// binary links 17 plugins, so this runs about as often at every exec of any plugin:
// it allocates one runner and one small closure per verb, and checks no
// more. The check that a config embedding Masq comes with Plugin.Masq (an
// interface assertion that builds its itab at run time) runs when the
// plugin runs a command (runner.start).
func (p Plugin[C]) Descriptor(hooks Hooks) plugin.Plugin {
	vers := p.Versions
	if vers == nil {
		vers = plugin.AllVersions
	}
	r := &runner[C]{p: p, hooks: hooks}
	return plugin.Plugin{
		Name:     p.Name,
		Summary:  p.Summary,
		Versions: vers,
		Funcs: skel.CNIFuncs{
			Add:    func(args *skel.CmdArgs) error { return r.run("ADD", args, r.add) },
			Del:    func(args *skel.CmdArgs) error { return r.run("DEL", args, r.del) },
			Check:  func(args *skel.CmdArgs) error { return r.run("CHECK", args, r.check) },
			GC:     func(args *skel.CmdArgs) error { return r.run("GC", args, r.gc) },
			Status: func(args *skel.CmdArgs) error { return r.run("STATUS", args, r.status) },
		},
	}
}

// run is what every command shares: parse the config, make the
// attachment, run the verb on it, close it. A panic that escapes the verb
// is answered with code 999 before the namespaces are closed (ADD recovers
// its own first, to undo with them still open); one that escapes the rest
// (in Parse, say, before there is anything to undo) is answered too,
// instead of a stack on stderr and no answer on stdout.
func (r *runner[C]) run(cmd string, args *skel.CmdArgs, verb func(a *Attachment, c C) error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panicError(v, nil)
		}
	}()
	a, c, err := r.start(cmd, args)
	if err != nil {
		return err
	}
	defer a.Close()
	defer recovered(&err, a.Log)
	return verb(a, c)
}

type runner[C Conf] struct {
	p     Plugin[C]
	hooks Hooks
}

// start parses the config and makes the attachment (nothing opened yet).
func (r *runner[C]) start(cmd string, args *skel.CmdArgs) (*Attachment, C, error) {
	var zero C
	if _, ok := any(zero).(masqer); ok && r.p.Masq == nil {
		// A programming error every test of the plugin shows: DEL would
		// leave the masquerade rules ADD made. run answers it (999).
		panic(fmt.Sprintf("attach: %s's config embeds Masq but Plugin.Masq is nil", r.p.Name))
	}
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
	return newAttachment(args, c.Common(), r.hooks, log, r.p.IPAM), c, nil
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
