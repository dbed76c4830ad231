// Command checkbench measures `cniforge check` on a node with many
// attachments (issue 24): it attaches N pods to one network through
// libcni (bridge with ipMasq → portmap → firewall, on iptables by
// default), in a stand-in host namespace and one namespace per pod that it
// makes and removes, then runs `DIR/cniforge check` over libcni's cache
// there, R times, and prints the wall time and the CPU time (user +
// system of cniforge and every plugin it ran) per run and per 10 pods.
//
//	go run ./scripts/checkbench [-pods 100] [-rounds 3] [-backend iptables] DIR...
//
// Each DIR is a folder made by `cniforge install --dir` (the multicall
// binary and its links). With several, each round runs each in turn, back
// to back, so they see the same machine load; each has its own host and
// pods. Run as root, after ./build_linux.sh and the install.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/cniforge/plugins/scripts/internal/benchnode"
	"github.com/cniforge/plugins/scripts/internal/stats"
	"github.com/cniforge/plugins/tests/parallel"
)

func main() {
	pods := flag.Int("pods", 100, "attachments on the node")
	rounds := flag.Int("rounds", 3, "cniforge check runs per folder")
	backend := flag.String("backend", "iptables", "ipMasqBackend and portmap backend: iptables or nftables")
	flag.Parse()
	if flag.NArg() == 0 || *pods < 1 || *pods > 250 || *rounds < 1 {
		fmt.Fprintln(os.Stderr, "usage: checkbench [-pods N (1-250)] [-rounds R] [-backend B] DIR...")
		os.Exit(2)
	}
	if err := run(*pods, *rounds, *backend, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "checkbench:", err)
		os.Exit(1)
	}
}

func run(nPods, rounds int, backend string, dirs []string) error {
	node, err := benchnode.New("cniforge-checkbench-")
	if err != nil {
		return err
	}
	defer node.Close()

	type side struct {
		dir, cache, conf string
		rt               *parallel.Runtime
		wall, cpu        []time.Duration
	}
	var sides []*side
	for i, dir := range dirs {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return err
		}
		rt, err := node.Host(i, parallel.Network{Name: "checkbench", Chain: true, Backend: backend, CNIVersion: "1.0.0"}, abs)
		if err != nil {
			return err
		}
		s := &side{dir: abs, rt: rt, cache: node.CacheDir(i), conf: filepath.Join(node.Folder(i), "conf")}
		if err := os.MkdirAll(s.conf, 0o755); err != nil {
			return err
		}
		pods := make([]*parallel.Pod, nPods)
		for j := range pods {
			pn, err := node.NewNS()
			if err != nil {
				return err
			}
			pods[j] = &parallel.Pod{NS: pn, HostPort: 20000 + j, ID: fmt.Sprintf("checkbench-%d-%d", i, j)}
		}
		if _, err := parallel.Phase(pods, 4, s.rt.Add); err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
		node.Defer(func() error { _, err := parallel.Phase(pods, 4, s.rt.Del); return err })
		sides = append(sides, s)
	}
	for range rounds {
		for _, s := range sides {
			var out bytes.Buffer
			cpu0, t0 := benchnode.ChildCPU(), time.Now()
			err := s.rt.Host.Do(func() error {
				cmd := exec.Command(filepath.Join(s.dir, "cniforge"), "check",
					"--cache-dir", s.cache, "--conf-dir", s.conf, "--bin-dir", s.dir)
				cmd.Stdout, cmd.Stderr = &out, &out
				return cmd.Run()
			})
			wall, cpu := time.Since(t0), benchnode.ChildCPU()-cpu0
			if err != nil {
				return fmt.Errorf("%s: cniforge check: %w\n%s", s.dir, err, out.String())
			}
			s.wall, s.cpu = append(s.wall, wall), append(s.cpu, cpu)
		}
	}
	fmt.Printf("%5s  %-30s %-30s %12s  %s\n", "pods", "wall s (median, rounds)", "CPU s (median, rounds)", "CPU s/10 pods", "binaries")
	for _, s := range sides {
		fmt.Printf("%5d  %-30s %-30s %12.3f  %s\n", nPods, summary(s.wall), summary(s.cpu),
			stats.Median(s.cpu).Seconds()*10/float64(nPods), s.dir)
	}
	return nil
}

func summary(v []time.Duration) string {
	s := fmt.Sprintf("%.2f (", stats.Median(v).Seconds())
	for i, d := range v {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%.2f", d.Seconds())
	}
	return s + ")"
}
