package testutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
)

// ProbeIPAM writes into dir (to put on CNI_PATH) an IPAM plugin named
// "probe-ipam" that answers every command with the one address addr
// ("10.54.0.2/24"). Its ADD holds before answering: it creates dir/at-add
// and waits for dir/resume, so that AtIPAMAdd can look at the namespaces,
// over netlink, as they are while IPAM ADD runs. For specs checking
// upstream's order: the interface exists in the container and is up when
// IPAM ADD runs (the dhcp IPAM plugin leases on it). The probe reads no
// kernel state itself: `ip`'s text carries errors of its own on a busy
// node (a peer netns it cannot name, issue 22).
func ProbeIPAM(dir, addr string) {
	ginkgo.GinkgoHelper()
	script := `#!/bin/sh
d=$(dirname "$0")
if [ "$CNI_COMMAND" = ADD ]; then
  : > "$d/at-add"
  i=0
  while [ ! -e "$d/resume" ]; do
    i=$((i+1))
    if [ $i -gt 1200 ]; then
      echo '{"cniVersion": "1.1.0", "code": 11, "msg": "probe-ipam: nobody looked within a minute"}'
      exit 1
    fi
    sleep 0.05
  done
  rm -f "$d/at-add" "$d/resume"
fi
echo '{"cniVersion": "1.1.0", "ips": [{"address": "` + addr + `"}]}'
`
	gomega.Expect(WriteExecutable(filepath.Join(dir, "probe-ipam"), []byte(script))).To(gomega.Succeed())
}

// WriteExecutable writes an executable file that this process may exec at
// once. It holds syscall.ForkLock while the file is open for writing: a
// child forked meanwhile by another goroutine (a busy spec's `ip` or
// plugin) would hold the write descriptor until its own exec, and an exec
// of the file then fails with ETXTBSY ("text file busy", seen in CI).
func WriteExecutable(path string, data []byte) error {
	syscall.ForkLock.Lock()
	defer syscall.ForkLock.Unlock()
	return os.WriteFile(path, data, 0o755)
}

// probeBudget bounds how long AtIPAMAdd waits for the probe's ADD.
const probeBudget = time.Minute

// AtIPAMAdd runs cmd (a plugin command whose IPAM is ProbeIPAM in dir) and,
// once the probe's ADD holds, calls look, then lets the probe answer. It
// returns cmd's output. A cmd that ends before its IPAM ADD fails the spec.
func AtIPAMAdd(dir string, cmd func() Output, look func()) Output {
	ginkgo.GinkgoHelper()
	done := make(chan Output, 1)
	go func() {
		defer ginkgo.GinkgoRecover()
		defer close(done) // after the send, or without one when cmd failed the spec
		done <- cmd()
	}()
	resume := func() {
		if err := os.WriteFile(filepath.Join(dir, "resume"), nil, 0o644); err != nil {
			ginkgo.Fail(err.Error())
		}
	}
	drained := false
	defer func() {
		if !drained {
			// look failed the spec: let the probe answer and the plugin end
			// before the spec's namespaces go.
			resume()
			<-done
		}
	}()
	deadline := time.Now().Add(probeBudget)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := os.Stat(filepath.Join(dir, "at-add"))
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			ginkgo.Fail(err.Error())
		}
		select {
		case out := <-done:
			drained = true
			ginkgo.Fail(fmt.Sprintf("the plugin ended before its IPAM ADD: err %v, stdout %s", out.Err, out.Stdout))
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			ginkgo.Fail(fmt.Sprintf("probe-ipam in %s: no ADD within %s", dir, probeBudget))
		}
	}
	look()
	resume()
	out := <-done
	drained = true
	return out
}
