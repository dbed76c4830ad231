package node

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cniforge/plugins/pkg/testutil"
)

// The node image's command installs, says so, stays up, and on SIGTERM
// exits 0 leaving the plugins installed; a foreign file stops it (exit 1,
// the pod restarts) unless --force.
func TestDaemonInstallsThenWaitsForSIGTERM(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "host", "opt", "cni", "bin")
	must(t, os.MkdirAll(dir, 0o755))
	cmd := exec.Command(testutil.Multicall(t), "daemon", "--dir", dir)
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	waitLine := func(prefix string) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("daemon's output ended before %q", prefix)
				}
				if strings.HasPrefix(l, prefix) {
					return
				}
			case <-deadline:
				_ = cmd.Process.Kill()
				t.Fatalf("no %q from the daemon", prefix)
			}
		}
	}
	waitLine("cniforge daemon: ")
	installed(t, dir)
	// Still up: had it exited, its output would end before "stopping".
	must(t, cmd.Process.Signal(syscall.SIGTERM))
	waitLine("cniforge daemon: stopping")
	if err := cmd.Wait(); err != nil {
		t.Errorf("daemon after SIGTERM: %v", err)
	}
	installed(t, dir)

	foreign := t.TempDir()
	must(t, os.WriteFile(filepath.Join(foreign, "bridge"), []byte("#!/bin/sh\n"), 0o755))
	if out, rc := runCLI(t, "daemon", "--dir", foreign); rc != 1 || !strings.Contains(out, "bridge") {
		t.Errorf("daemon over a foreign plugin: exit %d: %s", rc, out)
	}
	done := make(chan error, 1)
	cmd = exec.Command(testutil.Multicall(t), "daemon", "--dir", foreign, "--force")
	out, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "installed into") {
				_ = cmd.Process.Signal(syscall.SIGTERM)
			}
		}
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("daemon --force: %v", err)
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("daemon --force never said it installed")
	}
	installed(t, foreign)
}

// The gc unit the release ships runs a command line cniforge takes: its
// ExecStart, with the node's folders pointed at a stand-in node, exits 0.
func TestSystemdUnitRunsGC(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/systemd/cniforge-gc.service")
	must(t, err)
	var args []string
	for _, l := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(l, "ExecStart="); ok {
			args = strings.Fields(rest)
		}
	}
	if len(args) < 2 || args[0] != "/opt/cni/bin/cniforge" || args[1] != "gc" || !slices.Contains(args, "--apply") {
		t.Fatalf("ExecStart: %q", args)
	}
	n := newNode(t)
	must(t, os.MkdirAll(filepath.Join(n.cache, "results"), 0o755))
	for i, a := range args {
		switch {
		case i > 0 && args[i-1] == "--cache-dir":
			args[i] = n.cache
		case i > 0 && args[i-1] == "--conf-dir":
			args[i] = n.conf
		case i > 0 && args[i-1] == "--bin-dir":
			args[i] = n.bin
		case strings.HasPrefix(a, "/var/") || strings.HasPrefix(a, "/etc/"):
			t.Fatalf("ExecStart names %s in a form this test does not replace", a)
		}
	}
	var out string
	var rc int
	must(t, n.hostNS.Do(func() error {
		cmd := exec.Command(testutil.Multicall(t), args[1:]...)
		b, err := cmd.CombinedOutput()
		out = string(b)
		if ee, ok := err.(*exec.ExitError); ok {
			rc = ee.ExitCode()
			return nil
		}
		return err
	}))
	if rc != 0 {
		t.Errorf("the unit's gc on a stand-in node: exit %d:\n%s", rc, out)
	}
}

// With a gc loop after --, the daemon installs, says that loop is no
// reclaim to rely on from a container and what to run instead, then runs
// it (a dry run here) until SIGTERM; anything else after -- is refused
// before it installs.
func TestDaemonRunsTheReclaimLoop(t *testing.T) {
	n := newNode(t)
	must(t, os.MkdirAll(filepath.Join(n.cache, "results"), 0o755))
	dir := t.TempDir()
	if out, rc := runCLI(t, "daemon", "--dir", dir, "--", "gc", "--apply"); rc != 2 || !strings.Contains(out, "--every") {
		t.Errorf("daemon -- gc without --every: exit %d: %s", rc, out)
	}
	if out, rc := runCLI(t, "daemon", "--dir", dir, "--", "ls"); rc != 2 {
		t.Errorf("daemon -- ls: exit %d: %s", rc, out)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a refused daemon installed: %v", entries)
	}
	var out strings.Builder
	var stderr syncBuffer
	var rc int
	must(t, n.hostNS.Do(func() error {
		cmd := exec.Command(testutil.Multicall(t), "daemon", "--dir", dir, "--", "gc", "--every", "50ms",
			"--cache-dir", n.cache, "--conf-dir", n.conf, "--bin-dir", dir)
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		sc := bufio.NewScanner(stdout)
		timer := time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Kill() })
		defer timer.Stop()
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(sc.Text(), "cniforge daemon: ") {
				installed(t, dir)
				_ = cmd.Process.Signal(syscall.SIGTERM)
			}
		}
		err = cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok {
			rc = ee.ExitCode()
			return nil
		}
		return err
	}))
	if rc != 0 || !strings.Contains(out.String(), "running cniforge gc --every 50ms") || !strings.Contains(out.String(), "stopped by a signal") {
		t.Errorf("daemon with the gc loop: exit %d:\n%s", rc, out.String())
	}
	if warn := stderr.String(); !strings.Contains(warn, "the gc loop from a container is no supported reclaim") ||
		!strings.Contains(warn, "deploy/systemd's cniforge-gc.timer") {
		t.Errorf("daemon with the gc loop did not say what it cannot do; stderr:\n%s", warn)
	}
}

// The DaemonSet's container can reclaim nothing (no host paths, no
// capabilities, no iptables, no view of the host's mount namespace): the
// manifest must not tell how to run gc there, and points to the timer.
func TestDaemonSetDoesNotClaimToReclaim(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/cniforge-daemonset.yaml")
	must(t, err)
	manifest := string(raw)
	if strings.Contains(manifest, `"gc"`) || strings.Contains(manifest, "--every") {
		t.Errorf("the DaemonSet manifest still tells how to run gc in its container:\n%s", manifest)
	}
	if !strings.Contains(manifest, "cniforge-gc.timer") {
		t.Errorf("the DaemonSet manifest does not point to the systemd timer:\n%s", manifest)
	}
}
