package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The node image's command installs, says so, stays up, and on SIGTERM
// exits 0 leaving the plugins installed; a foreign file stops it (exit 1,
// the pod restarts) unless --force.
func TestDaemonInstallsThenWaitsForSIGTERM(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "host", "opt", "cni", "bin")
	must(t, os.MkdirAll(dir, 0o755))
	cmd := exec.Command(multicall(t), "daemon", "--dir", dir)
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
	cmd = exec.Command(multicall(t), "daemon", "--dir", foreign, "--force")
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
