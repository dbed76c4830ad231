package ipam

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/cniforge/plugins/pkg/prestart"
)

// Prestarted is an IPAM delegate exec'd before the plugin needs it, blocked
// reading its config on stdin. Starting a Go plugin costs about 10 ms on
// this machine, as much as the plugin's own netlink work: started early,
// the delegate's start overlaps that work (and kernel waits such as the
// RCU grace period of a link deletion), while the delegate still acts only
// when, and in the order, the plugin hands it its config. An IPAM plugin
// does nothing before it has read its config (the spec gives it none
// before), so one never handed it is killed without effect.
//
// Pass it to the delegation with WithPrestarted; it is used by the first
// delegation that runs the same binary with the same environment, and any
// other delegation execs as usual. Call Cancel when done (deferred): it
// reaps the delegate if it was not used. A nil *Prestarted is valid and
// does nothing.
type Prestarted struct {
	path string
	env  []string
	proc *prestart.Proc
	used atomic.Bool // taken by a delegation, or cancelled
}

// Prestart execs the IPAM plugin ipamType from CNI_PATH for verb, with
// the environment invoke's delegation would give it. It returns nil when
// there is nothing to gain or it cannot: a type other than the suite's own
// IPAM plugins (only those are known to read their config before acting;
// a third-party or test binary may act on its environment alone), a binary
// not on CNI_PATH (the delegation then reports it), one that runs in this
// process (the multicall binary), or a failed start.
func Prestart(ipamType, verb string) *Prestarted {
	if !prestartable(ipamType) {
		return nil
	}
	path, err := invoke.FindInPath(ipamType, filepath.SplitList(os.Getenv("CNI_PATH")))
	if err != nil {
		return nil
	}
	if e, ok := delegateExec.(*sameBinaryExec); ok {
		if _, in := e.inProcess(path); in {
			return nil
		}
	}
	p := &Prestarted{path: path, env: (&invoke.DelegateArgs{Command: verb}).AsEnv()}
	slices.Sort(p.env) // invoke builds it from a map: compared as a set
	cmd := exec.Command(path)
	cmd.Env = p.env
	if p.proc, err = prestart.Start(cmd); err != nil {
		return nil // the delegation execs it again and reports the error
	}
	return p
}

// Cancel kills and reaps the delegate if no delegation used it. Killing is
// safe: it has not been given a config, so it has changed nothing.
func (p *Prestarted) Cancel() {
	if p == nil || !p.used.CompareAndSwap(false, true) {
		return
	}
	p.proc.Kill()
}

// prestartable are the IPAM types whose plugins (ours and upstream's, on
// skel) read their whole config from stdin before they do anything.
// prestartable says whether ipamType is one of the suite's own IPAM plugins
// (a switch: a package-level map would be built in every exec).
func prestartable(ipamType string) bool {
	switch ipamType {
	case "host-local", "static", "dhcp":
		return true
	}
	return false
}

type prestartKey struct{}

// WithPrestarted returns ctx carrying p for the delegations run with it.
func WithPrestarted(ctx context.Context, p *Prestarted) context.Context {
	if p == nil {
		return ctx
	}
	return context.WithValue(ctx, prestartKey{}, p)
}

// take returns the prestarted delegate in ctx that matches path and
// environ, marking it used; nil when there is none.
func take(ctx context.Context, path string, environ []string) *Prestarted {
	p, _ := ctx.Value(prestartKey{}).(*Prestarted)
	if p == nil || p.path != path || !slices.Equal(p.env, slices.Sorted(slices.Values(environ))) || !p.used.CompareAndSwap(false, true) {
		return nil
	}
	return p
}

// run hands the delegate its config and waits for it, with the results and
// errors invoke.RawExec gives an exec of its own.
func (p *Prestarted) run(ctx context.Context, stdin []byte) ([]byte, error) {
	stop := context.AfterFunc(ctx, func() { _ = p.proc.Process().Kill() })
	defer stop()
	werr, err := p.proc.Feed(stdin)
	// A delegate that exits without reading all of its stdin is judged by
	// its exit status alone, as os/exec (and so invoke) judges one.
	if err == nil && werr != nil && !errors.Is(werr, syscall.EPIPE) {
		err = fmt.Errorf("write config to %s: %w", p.path, werr)
	}
	if err != nil {
		return nil, p.pluginErr(err)
	}
	if p.proc.Stderr.Len() > 0 {
		_, _ = p.proc.Stderr.WriteTo(os.Stderr) // informational only, as invoke does
	}
	return p.proc.Stdout.Bytes(), nil
}

// pluginErr turns a failed run into the CNI error it printed, or one
// quoting its stderr when it printed none.
func (p *Prestarted) pluginErr(err error) error {
	out, errOut := p.proc.Stdout.Bytes(), p.proc.Stderr.Bytes()
	e := &types.Error{}
	switch {
	case len(out) > 0:
		if perr := json.Unmarshal(out, e); perr != nil {
			e.Msg = fmt.Sprintf("netplugin failed but error parsing its diagnostic message %q: %v", out, perr)
		}
	case len(errOut) > 0:
		e.Msg = fmt.Sprintf("netplugin failed: %q", errOut)
	default:
		e.Msg = fmt.Sprintf("netplugin failed with no error message: %v", err)
	}
	return e
}
