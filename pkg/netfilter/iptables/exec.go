package iptables

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/cniforge/plugins/pkg/prestart"

	"github.com/cniforge/plugins/pkg/netfilter/iptnft"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// The iptables backends' processes: one run per iptables-save or
// iptables-restore, and a restore started before its input is known.

func RunCommand(name string, args []string, stdin []byte) ([]byte, error) {
	cmd := exec.Command(name, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return commandResult(name, cmd.Run(), &stdout, &stderr)
}

// commandResult is what a finished command gives: its output, or its error
// with what it printed on stderr.
func commandResult(name string, err error, stdout, stderr *bytes.Buffer) ([]byte, error) {
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return nil, fmt.Errorf("%s: %w: %s", name, err, msg)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return stdout.Bytes(), nil
}

func (m *Runner) Exec(name string, args []string, stdin []byte) ([]byte, error) {
	if m.Run != nil {
		return m.Run(name, args, stdin)
	}
	if p := m.takePrestarted(name, args); p != nil {
		return p.finish(stdin)
	}
	return RunCommand(name, args, stdin)
}

// lookPath is exec.LookPath with symlinks resolved, remembered for the
// process (per PATH): a DEL asks for the same tools several times per
// family, and each ask stats every PATH directory.
func lookPath(name string) (string, error) {
	return cachedPath(name, true)
}

// findTool is exec.LookPath, remembered as lookPath is, for a caller that
// only needs to know the tool is there: resolving the links (Debian's
// alternatives: two, each a readlink and a stat per path element) is
// needed only by isNFTVariant.
func findTool(name string) (string, error) {
	return cachedPath(name, false)
}

func cachedPath(name string, resolve bool) (string, error) {
	type found struct {
		path string
		err  error
	}
	key := os.Getenv("PATH") + "\x00" + name
	if resolve {
		key += "\x00resolved"
	}
	if v, ok := lookPaths.Load(key); ok {
		return v.(found).path, v.(found).err
	}
	var p string
	var err error
	if resolve {
		p, err = findTool(name)
		if err == nil {
			p, err = filepath.EvalSymlinks(p)
		}
	} else {
		p, err = exec.LookPath(name)
	}
	lookPaths.Store(key, found{p, err})
	return p, err
}

var lookPaths sync.Map

// Prestart starts the IPv4 iptables-restore that Setup's first write
// will feed, before the addresses are known (see pkg/prestart): a restore
// spends most of its 10 ms in its own start (the dynamic loader, its
// libraries), which then overlaps the caller's IPAM and link work. Only
// iptables-nft: legacy iptables-restore -w may take the xtables lock
// before it reads. Until Setup feeds it, the process has touched nothing;
// Release kills it. It acts in the calling thread's namespace, as Setup
// does.
func (m *Runner) Prestart() {
	if m.Run != nil || !m.IsNFTVariant(nftnl.IPv4) || m.nftReady(nftnl.IPv4) {
		return
	}
	name := m.Tool(nftnl.IPv4, "restore")
	if p, err := prestart.Start(exec.Command(name, RestoreArgs...)); err == nil {
		m.mu.Lock()
		m.Prestarted = &prestartedRestore{name: name, args: RestoreArgs, Proc: p}
		m.mu.Unlock()
	}
}

// nftReady reports whether Setup will likely take setupNFT's way, with
// no restore to feed: f's nat table and its POSTROUTING chain are there.
func (m *Runner) nftReady(f nftnl.Family) bool {
	if m.NoNFT {
		return false
	}
	return nftnl.WithNFT(func(c *nftnl.NftConn) error {
		if !iptnft.IptablesPostrouting(c, f) {
			return iptnft.ErrNotNFTReady
		}
		return nil
	}) == nil
}

// Release ends a prestarted restore that Setup did not take.
func (m *Runner) Release() {
	m.mu.Lock()
	p := m.Prestarted
	m.Prestarted = nil
	m.mu.Unlock()
	if p != nil {
		p.Proc.Kill()
	}
}

// takePrestarted hands over the prestarted process when it is the one
// asked for.
func (m *Runner) takePrestarted(name string, args []string) *prestartedRestore {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.Prestarted
	if p == nil || p.name != name || !slices.Equal(p.args, args) {
		return nil
	}
	m.Prestarted = nil
	return p
}

var RestoreArgs = []string{"-w", "--noflush"}

// prestartedRestore is a started restore waiting for its input.
type prestartedRestore struct {
	name string
	args []string
	Proc *prestart.Proc
}

// finish feeds it stdin and waits for it, with runCommand's results.
func (p *prestartedRestore) finish(stdin []byte) ([]byte, error) {
	werr, err := p.Proc.Feed(stdin)
	out, err := commandResult(p.name, err, &p.Proc.Stdout, &p.Proc.Stderr)
	if err == nil && werr != nil {
		err = fmt.Errorf("%s: write its input: %w", p.name, werr)
	}
	return out, err
}
