package killadd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/testutil"
)

// errKilled is what killExec returns for a plugin it killed (or did not
// start because the kill moment had passed): libcni stops the list there,
// as it would on a runtime's timeout.
var errKilled = errors.New("killed by the test")

// killExec is the runtime's exec of plugins (libcni's invoke.Exec) with a
// kill switch. Every plugin runs in a process group of its own, which the
// IPAM plugin it execs joins. During an ADD armed with arm, the group is
// SIGKILLed at the kill moment: delay after the start of the plugin named
// target (target "": after the start of the list's ADD, whatever plugin
// then runs). A plugin whose turn comes after the kill moment is not
// started. Other commands run plainly.
type killExec struct {
	invoke.RawExec
	version.PluginDecoder

	mu       sync.Mutex
	target   string
	delay    time.Duration
	armed    bool
	deadline time.Time // set when the kill's clock starts
	// outcome of the armed ADD
	killed   bool          // a plugin was killed or not started
	killedIn string        // which plugin
	ran      time.Duration // the target's (or the list's) duration when nothing was killed
	listFrom time.Time
	inAdd    bool // between startList and endList
	curPid   int  // the running plugin's group, while unreaped (0: none)
}

// arm prepares the next ADD: kill target at delay after its start. Call
// startList right before libcni's AddNetworkList.
func (e *killExec) arm(target string, delay time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.target, e.delay, e.armed = target, delay, true
	e.deadline, e.killed, e.killedIn, e.ran = time.Time{}, false, "", 0
}

// disarm makes ADDs run to their end; measure reads ran after it.
func (e *killExec) disarm() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.armed = false
	e.killed, e.killedIn, e.ran = false, "", 0
	e.deadline = time.Time{}
}

func (e *killExec) startList() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.listFrom = time.Now()
	e.inAdd = true
	if e.armed && e.target == "" {
		e.deadline = e.listFrom.Add(e.delay)
	}
}

// endList records the list's duration when the target is the list.
func (e *killExec) endList() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.inAdd = false
	if e.target == "" && !e.killed {
		e.ran = time.Since(e.listFrom)
	}
}

func (e *killExec) outcome() (killed bool, in string, ran time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.killed, e.killedIn, e.ran
}

func envValue(environ []string, key string) string {
	for _, kv := range slices.Backward(environ) {
		if len(kv) > len(key) && kv[:len(key)+1] == key+"=" {
			return kv[len(key)+1:]
		}
	}
	return ""
}

// ExecPlugin runs pluginPath as libcni asks. It starts the child on the
// calling goroutine's thread, so run libcni inside hostNS.Do.
func (e *killExec) ExecPlugin(ctx context.Context, pluginPath string, stdinData []byte, environ []string) ([]byte, error) {
	name := filepath.Base(pluginPath)
	isAdd := envValue(environ, "CNI_COMMAND") == "ADD"
	e.mu.Lock()
	armed := e.armed && isAdd && !e.killed
	if armed && e.target == name {
		e.deadline = time.Now().Add(e.delay)
	}
	deadline, isTarget := e.deadline, e.target == name
	if armed && !deadline.IsZero() && !time.Now().Before(deadline) {
		// The runtime gave up before this plugin's turn.
		e.killed, e.killedIn = true, name+" (not started)"
		e.mu.Unlock()
		return nil, errKilled
	}
	e.mu.Unlock()

	cmd := exec.Command(pluginPath)
	cmd.Env = environ
	cmd.Stdin = bytes.NewReader(stdinData)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	pid := cmd.Process.Pid
	e.mu.Lock()
	e.curPid = pid
	e.mu.Unlock()
	// The group id stays ours until the kill below is sent.
	exited := testutil.ExitedUnreaped(pid)
	var timer <-chan time.Time
	if armed && !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		timer = t.C
	}
	killed := false
	select {
	case <-exited:
	case <-timer:
		if err := testutil.KillGroup(pid); err != nil {
			return nil, err
		}
		<-exited
		killed = true
	}
	ran := time.Since(started)
	// From here the group id may pass to another process: no kill of it
	// (killIPAM's included) after this.
	e.mu.Lock()
	e.curPid = 0
	e.mu.Unlock()
	runErr := cmd.Wait()
	// Reap what is left of the group (an IPAM child orphaned by the kill;
	// the suite is its subreaper), so nothing of this ADD still runs when
	// the runtime's DEL starts.
	for {
		_, werr := unix.Wait4(-pid, nil, 0, nil)
		if !errors.Is(werr, unix.EINTR) {
			break
		}
	}
	var exitErr *exec.ExitError
	if errors.As(runErr, &exitErr) {
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			killed = true
		}
	}
	if killed {
		e.mu.Lock()
		e.killed = true
		if e.killedIn == "" {
			e.killedIn = name
		}
		e.mu.Unlock()
		return nil, errKilled
	}
	if armed && isTarget {
		e.mu.Lock()
		e.ran = ran
		e.mu.Unlock()
	}
	if runErr != nil {
		// As invoke.RawExec reports it: the CNI error JSON on stdout.
		if stdout.Len() > 0 {
			return nil, fmt.Errorf("%s %s: %s (stderr %q)", name, envValue(environ, "CNI_COMMAND"), bytes.TrimSpace(stdout.Bytes()), stderr.Bytes())
		}
		return nil, fmt.Errorf("%s: %w (stderr %q)", name, runErr, stderr.Bytes())
	}
	return stdout.Bytes(), nil
}

// watchIPAM arms kills for an IPAM plugin, which the runtime does not
// exec (the interface plugin does): an inotify watch on the binary at path
// sees the exec (IN_OPEN) and the end of the process (IN_CLOSE_NOWRITE,
// when the last mapping of the file goes). At the exec of an armed ADD it
// starts the kill clock; the kill then goes to the running plugin's group,
// which the IPAM plugin joined. Unkilled runs record their duration. It
// stops when stop is closed.
func (e *killExec) watchIPAM(path string, stop <-chan struct{}) error {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("inotify: %w", err)
	}
	if _, err := unix.InotifyAddWatch(fd, path, unix.IN_OPEN|unix.IN_CLOSE_NOWRITE); err != nil {
		unix.Close(fd)
		return fmt.Errorf("watch %s: %w", path, err)
	}
	name := filepath.Base(path)
	go func() {
		<-stop
		unix.Close(fd) // ends the read below
	}()
	go func() {
		var opened time.Time
		buf := make([]byte, 4096)
		for {
			n, err := unix.Read(fd, buf)
			if err != nil {
				if errors.Is(err, unix.EINTR) {
					continue
				}
				return
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				off += unix.SizeofInotifyEvent + int(ev.Len)
				e.mu.Lock()
				armed := e.armed && e.inAdd && e.target == name && !e.killed
				switch {
				case ev.Mask&unix.IN_OPEN != 0:
					opened = time.Now()
					if armed && e.deadline.IsZero() {
						e.deadline = opened.Add(e.delay)
						time.AfterFunc(e.delay, func() { e.killRunning(name) })
					}
				case ev.Mask&unix.IN_CLOSE_NOWRITE != 0:
					if armed && !opened.IsZero() {
						e.ran = time.Since(opened)
					}
				}
				e.mu.Unlock()
			}
		}
	}()
	return nil
}

// killRunning kills the group of the plugin that runs now, if one does
// (unreaped, so its id is still its group's).
func (e *killExec) killRunning(in string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.curPid == 0 || !e.inAdd {
		return
	}
	if err := unix.Kill(-e.curPid, unix.SIGKILL); err == nil {
		e.killedIn = in
	}
}
