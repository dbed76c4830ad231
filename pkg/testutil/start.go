package testutil

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Proc is a plugin binary started by Start, running in a process group of
// its own.
type Proc struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	started        time.Time
}

// Start starts the built binary bin/<name> with c in a new process group
// and returns without waiting: the IPAM plugin it execs joins that group,
// so KillGroupAfter kills both at once, as a runtime's timeout or a node crash
// would. The child starts in the network namespace of the calling thread,
// so call Start inside hostNS.Do.
func Start(name string, c Call) (*Proc, error) {
	cmd, err := command(name, c)
	if err != nil {
		return nil, err
	}
	p := &Proc{cmd: cmd}
	cmd.Stdout, cmd.Stderr = &p.stdout, &p.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return p, nil
}

// KillGroupAfter waits up to d for p to end by itself and, if it has not,
// sends SIGKILL to every process of p's group; then it waits as Wait does.
// ran is how long p ran when it ended by itself (killed false). The group
// is killed only while its leader is unreaped (running, or a zombie held
// with WNOWAIT), so its id cannot have passed to another process group.
func (p *Proc) KillGroupAfter(d time.Duration) (out Output, killed bool, ran time.Duration, err error) {
	pid := p.cmd.Process.Pid
	exited := ExitedUnreaped(pid)
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case err := <-exited:
		ran = time.Since(p.started)
		if err != nil {
			return Output{}, false, 0, fmt.Errorf("wait for process %d: %w", pid, err)
		}
	case <-timer.C:
		if err := KillGroup(pid); err != nil {
			return Output{}, false, 0, err
		}
		<-exited
	}
	out, killed, err = p.Wait()
	return out, killed, ran, err
}

// ExitedUnreaped delivers the outcome of waiting for process pid (a child
// of the caller) to exit, without reaping it: waitid with WNOWAIT leaves
// the zombie for exec.Cmd.Wait, so until then pid, and the process group
// it leads, cannot pass to another process and stay the caller's to
// signal.
func ExitedUnreaped(pid int) <-chan error {
	exited := make(chan error, 1)
	go func() {
		for {
			err := unix.Waitid(unix.P_PID, pid, nil, unix.WEXITED|unix.WNOWAIT, nil)
			if !errors.Is(err, unix.EINTR) {
				exited <- err
				return
			}
		}
	}()
	return exited
}

// KillGroup sends SIGKILL to every process of the group pid leads; a group
// already gone is success. Call it only while the leader is unreaped (see
// ExitedUnreaped).
func KillGroup(pid int) error {
	if err := unix.Kill(-pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("kill process group %d: %w", pid, err)
	}
	return nil
}

// Wait waits for p to end and returns what it printed; killed reports that
// a signal ended it, in which case Output.Err is nil and Stdout may hold a
// partial result. When the caller is a child subreaper (BecomeSubreaper),
// Wait also reaps the rest of p's group (an IPAM child orphaned by a kill),
// so none of it still runs when Wait returns.
func (p *Proc) Wait() (out Output, killed bool, err error) {
	runErr := p.cmd.Wait()
	// The group's id is the leader's pid; the kernel does not reuse it
	// while an orphan of the group lives.
	for {
		_, werr := unix.Wait4(-p.cmd.Process.Pid, nil, 0, nil)
		if errors.Is(werr, unix.EINTR) {
			continue
		}
		break // ECHILD: no process of the group is our child any more
	}
	out = Output{Stdout: p.stdout.Bytes(), Stderr: p.stderr.Bytes()}
	var exitErr *exec.ExitError
	if errors.As(runErr, &exitErr) {
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return out, true, nil
		}
		out.Err, err = cniError(p.cmd.Path, exitErr, out)
		return out, false, err
	}
	return out, false, runErr
}

// BecomeSubreaper makes the test process the parent of any orphan of the
// processes it starts (prctl PR_SET_CHILD_SUBREAPER), so Proc.Wait can wait
// for an IPAM plugin whose parent was killed. It affects the whole test
// process: call it from a suite that starts no other long-lived children.
func BecomeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("become child subreaper: %w", err)
	}
	return nil
}
