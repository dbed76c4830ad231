// Command parallelbench measures parallel pod throughput: N pods attached
// to one network by W workers through libcni, then detached by W, with the
// built binaries, in a stand-in host namespace and one container namespace
// per pod that it makes and removes. It prints pods/s for ADD and for DEL.
// scripts/parallel-bench.sh runs it; see there.
//
//	parallelbench [-pods 64] [-workers 8] [-rounds 3] [-chain] [-backend iptables] DIR...
//
// Each DIR is a folder of plugins (bin/, or one made by `cniforge install
// --dir`). With several, every round runs each in turn, back to back, so
// they see the same machine load. Besides pods/s each row gives the CPU
// time (user + system, ms) the plugin processes used per pod: on a machine
// that other work keeps busy that varies much less than pods/s.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cniforge/plugins/scripts/internal/benchnode"
	"github.com/cniforge/plugins/scripts/internal/stats"
	"github.com/cniforge/plugins/tests/parallel"
)

func main() {
	pods := flag.Int("pods", 64, "attachments per round")
	workers := flag.Int("workers", 8, "parallel ADDs, then parallel DELs")
	rounds := flag.Int("rounds", 3, "rounds per binary folder")
	chain := flag.Bool("chain", false, "bridge → portmap → firewall instead of bridge alone")
	backend := flag.String("backend", "iptables", "ipMasqBackend and portmap backend: iptables or nftables")
	label := flag.String("label", "", "scenario name printed on each row")
	cniVersion := flag.String("cniversion", "1.1.0", "the conflist's cniVersion (1.0.0 for a suite that refuses 1.1.0)")
	flag.Parse()
	dirs := flag.Args()
	if len(dirs) == 0 || *pods < 1 || *workers < 1 || *rounds < 1 {
		fmt.Fprintln(os.Stderr, "usage: parallelbench [-pods N] [-workers W] [-rounds R] [-chain] [-backend B] DIR...")
		os.Exit(2)
	}
	if *label == "" {
		*label = "bridge"
		if *chain {
			*label = "chain"
		}
	}
	if err := run(*label, *pods, *workers, *rounds, *chain, *backend, *cniVersion, dirs); err != nil {
		fmt.Fprintln(os.Stderr, "parallelbench:", err)
		os.Exit(1)
	}
}

// sample is one round: pods/s, and the CPU time (user + system) the
// plugin processes used per pod, which the machine's load does not change
// much: on a saturated machine it is what bounds throughput.
type sample struct{ add, del, addCPU, delCPU float64 }

func run(label string, nPods, workers, rounds int, chain bool, backend, cniVersion string, dirs []string) error {
	node, err := benchnode.New("cniforge-parallelbench-")
	if err != nil {
		return err
	}
	defer node.Close()

	// One stand-in host per binary folder (benchnode.Node.Host).
	type side struct {
		dir string
		rt  *parallel.Runtime
		got []sample
	}
	var sides []*side
	for i, dir := range dirs {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return err
		}
		rt, err := node.Host(i, parallel.Network{Name: "parbench", Chain: chain, Backend: backend, CNIVersion: cniVersion}, abs)
		if err != nil {
			return err
		}
		sides = append(sides, &side{dir: dir, rt: rt})
	}
	pods := make([]*parallel.Pod, nPods)
	for i := range pods {
		n, err := node.NewNS()
		if err != nil {
			return err
		}
		pods[i] = &parallel.Pod{NS: n, HostPort: 20000 + i}
	}

	for r := range rounds + 1 { // round 0 warms up: the bridge, the base chains, the page cache
		for si, s := range sides {
			for i, p := range pods {
				p.ID = fmt.Sprintf("parbench-%d-%d-%d", si, r, i)
			}
			cpu0 := benchnode.ChildCPU()
			addT, err := parallel.Phase(pods, workers, s.rt.Add)
			cpu1 := benchnode.ChildCPU()
			if err != nil {
				return fmt.Errorf("%s: %w", s.dir, err)
			}
			if dups := parallel.Duplicates(pods); len(dups) > 0 {
				return fmt.Errorf("%s: addresses handed out twice: %s", s.dir, strings.Join(dups, "; "))
			}
			delT, err := parallel.Phase(pods, workers, s.rt.Del)
			cpu2 := benchnode.ChildCPU()
			if err != nil {
				return fmt.Errorf("%s: %w", s.dir, err)
			}
			if r > 0 {
				ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(nPods) }
				s.got = append(s.got, sample{parallel.PodsPerSecond(nPods, addT), parallel.PodsPerSecond(nPods, delT),
					ms(cpu1 - cpu0), ms(cpu2 - cpu1)})
			}
		}
	}

	fmt.Printf("%-8s %-9s %7s %5s  %-28s %-28s %8s %8s  %s\n", "scenario", "backend", "workers", "pods",
		"ADD pods/s (median, rounds)", "DEL pods/s (median, rounds)", "ADD cpu", "DEL cpu", "binaries")
	for _, s := range sides {
		var adds, dels, addCPU, delCPU []float64
		for _, g := range s.got {
			adds, dels = append(adds, g.add), append(dels, g.del)
			addCPU, delCPU = append(addCPU, g.addCPU), append(delCPU, g.delCPU)
		}
		fmt.Printf("%-8s %-9s %7d %5d  %-28s %-28s %8.1f %8.1f  %s\n", label, backend, workers, nPods,
			summary(adds), summary(dels), stats.Median(addCPU), stats.Median(delCPU), s.dir)
	}
	return nil
}

// summary is "median (r1 r2 ...)".
func summary(v []float64) string {
	var each []string
	for _, x := range v {
		each = append(each, fmt.Sprintf("%.0f", x))
	}
	return fmt.Sprintf("%.1f (%s)", stats.Median(v), strings.Join(each, " "))
}
