// Package prestart starts a process before its input is known. The process
// waits, blocked reading its stdin, while the caller works out what to feed
// it, so that its own start (exec, the dynamic loader, a Go runtime: 5 to
// 15 ms on these machines) overlaps the caller's work. The processes the
// suite prestarts (IPAM plugins, iptables-restore) read their whole input
// before they act, so one that is never fed has done nothing, and is
// killed without effect.
package prestart

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"sync/atomic"
)

// Proc is a started process waiting for its stdin. Feed or Kill it exactly
// once; the first of them wins and a later one does nothing.
type Proc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  atomic.Bool
	// Stdout and Stderr hold what it printed, once Feed has returned.
	Stdout, Stderr bytes.Buffer
}

// Start starts cmd, whose Stdin, Stdout and Stderr must be unset, with a
// pipe on its stdin. It starts in the calling thread's network namespace.
func Start(cmd *exec.Cmd) (*Proc, error) {
	p := &Proc{cmd: cmd}
	cmd.Stdout, cmd.Stderr = &p.Stdout, &p.Stderr
	w, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, err
	}
	p.stdin = w
	return p, nil
}

// Feed writes in to the process's stdin, closes it, and waits for the
// process to end. err is its exit (as exec.Cmd.Wait gives it); werr is the
// write's, which a caller may judge as os/exec does: a process that exits
// without reading all of its input is judged by its exit status alone.
func (p *Proc) Feed(in []byte) (werr, err error) {
	if !p.done.CompareAndSwap(false, true) {
		return nil, os.ErrProcessDone
	}
	_, werr = p.stdin.Write(in)
	if cerr := p.stdin.Close(); werr == nil {
		werr = cerr
	}
	return werr, p.cmd.Wait()
}

// Kill ends a process that was never fed, and reaps it.
func (p *Proc) Kill() {
	if !p.done.CompareAndSwap(false, true) {
		return
	}
	_ = p.cmd.Process.Kill() // best effort: it may have ended on its own
	p.stdin.Close()
	_ = p.cmd.Wait() // its "killed" status is expected
}

// Process is the started process, for a caller that must signal it while
// Feed waits (a cancelled context).
func (p *Proc) Process() *os.Process { return p.cmd.Process }

// Exited reports whether the process has been reaped (after Feed or Kill).
func (p *Proc) Exited() bool { return p.cmd.ProcessState != nil }
