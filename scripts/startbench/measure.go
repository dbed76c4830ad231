package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cniforge/plugins/scripts/internal/stats"
)

// call is one way to exec a plugin: its environment (besides PATH), its
// stdin, and what its answer must be, so that a binary that fails early
// (missing, the wrong plugin, a crash) is never timed as a fast one.
type call struct {
	title string
	env   func(plugin string) []string
	stdin func(plugin string) []byte
	check func(exit int, stdout []byte) error
}

var calls = map[string]call{
	"version": {
		title: "CNI_COMMAND=VERSION",
		env:   func(string) []string { return []string{"CNI_COMMAND=VERSION"} },
		stdin: func(string) []byte { return nil },
		check: func(exit int, stdout []byte) error {
			var v struct {
				Supported []string `json:"supportedVersions"`
			}
			if exit != 0 || json.Unmarshal(stdout, &v) != nil || len(v.Supported) == 0 {
				return fmt.Errorf("exit %d, want 0 and a version list", exit)
			}
			return nil
		},
	},
	"add": {
		title: `ADD of {"ipam": 5, ...} (refused while parsing)`,
		env: func(string) []string {
			return []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=startbench", "CNI_IFNAME=eth0",
				"CNI_NETNS=/run/netns/cniforge-startbench-none", "CNI_PATH=/nonexistent"}
		},
		stdin: func(plugin string) []byte {
			return fmt.Appendf(nil, `{"cniVersion":"1.0.0","name":"startbench","type":%q,"ipam":5}`, plugin)
		},
		check: func(exit int, stdout []byte) error {
			var e struct {
				Code int    `json:"code"`
				Msg  string `json:"msg"`
			}
			if exit != 1 || json.Unmarshal(stdout, &e) != nil || e.Code == 0 || !strings.Contains(e.Msg, "ipam") {
				return fmt.Errorf("exit %d, want 1 and CNI error JSON about ipam", exit)
			}
			return nil
		},
	},
}

// sample is one exec: wall time, CPU time (user + system), minor page
// faults. (Not the peak RSS: a child forked with CLONE_VM, as Go's
// os/exec does, reports the parent's.)
type sample struct {
	wall, cpu time.Duration
	minflt    int64
}

func key(plugin, label string) string { return plugin + "/" + label }

// inTurn is the folders that run plugin p in this round, in turn: the
// order reversed every other round (what the machine's load does to one,
// it does to the others), without a folder to compare with (-c) that
// lacks p.
func inTurn(folders []folder, round int, p string) []folder {
	order := make([]folder, 0, len(folders))
	for _, f := range folders {
		if _, err := os.Stat(filepath.Join(f.dir, p)); err != nil && f.label != "multi" && f.label != "sep" {
			continue
		}
		order = append(order, f)
	}
	if round%2 != 0 {
		slices.Reverse(order)
	}
	return order
}

// measure execs every plugin in every folder that has it n times, after
// one untimed exec each (page cache). Round by round, plugin by plugin,
// folder by folder, the folders' order reversed every other round: what
// the machine's load does to one, it does to the others.
func measure(folders []folder, plugins []string, c call, n int) (map[string][]sample, error) {
	samples := map[string][]sample{}
	for round := -1; round < n; round++ {
		for _, p := range plugins {
			for _, f := range inTurn(folders, round, p) {
				path := filepath.Join(f.dir, p)
				s, _, err := execOnce(path, c.env(p), c.stdin(p), c.check)
				if err != nil {
					return nil, err
				}
				if round >= 0 {
					samples[key(p, f.label)] = append(samples[key(p, f.label)], s)
				}
			}
		}
	}
	return samples, nil
}

// execOnce runs path once with env (and PATH only: nothing of ours, such
// as GODEBUG or GOMAXPROCS, leaks into it) and stdin, and checks its answer.
func execOnce(path string, env []string, stdin []byte, check func(int, []byte) error) (sample, []byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(path)
	cmd.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t0 := time.Now()
	err := cmd.Run()
	wall := time.Since(t0)
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		return sample{}, nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := check(cmd.ProcessState.ExitCode(), stdout.Bytes()); err != nil {
		return sample{}, nil, fmt.Errorf("%s %s: %w: stdout %q, stderr %q", strings.Join(env, " "), path, err, stdout.Bytes(), stderr.Bytes())
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return sample{
		wall:   wall,
		cpu:    time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		minflt: ru.Minflt,
	}, stderr.Bytes(), nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func medianMs(v []sample, f func(sample) time.Duration) float64 {
	d := make([]time.Duration, len(v))
	for i, s := range v {
		d[i] = f(s)
	}
	return ms(stats.Median(d))
}

func printTable(w io.Writer, folders []folder, plugins []string, samples map[string][]sample) {
	var cols []string // per group: multi, then each folder and multi/folder
	for i, f := range folders {
		cols = append(cols, fmt.Sprintf(" %7s", f.label))
		if i > 0 {
			cols = append(cols, fmt.Sprintf(" %7s", "m/"+f.label))
		}
	}
	group := strings.Join(cols, "")
	width := len(group)
	fmt.Fprintf(w, "%-12s %-*s %s\n", "", width-1, "wall ms (median)", "CPU ms (median)")
	fmt.Fprintf(w, "%-12s%s %s\n", "plugin", group, group)
	var within [2]int // multi <= sep, in wall and in CPU
	for _, p := range plugins {
		row := fmt.Sprintf("%-12s", p)
		for j, f := range []func(sample) time.Duration{
			func(s sample) time.Duration { return s.wall },
			func(s sample) time.Duration { return s.cpu },
		} {
			if j > 0 {
				row += " "
			}
			m := medianMs(samples[key(p, "multi")], f)
			for i, fo := range folders {
				v, ok := samples[key(p, fo.label)]
				if !ok {
					row += fmt.Sprintf(" %7s %7s", "-", "-")
					continue
				}
				x := medianMs(v, f)
				row += fmt.Sprintf(" %7.2f", x)
				if i > 0 {
					row += fmt.Sprintf(" %7.2f", m/x)
				}
				if fo.label == "sep" && m <= x {
					within[j]++
				}
			}
		}
		fmt.Fprintln(w, row)
	}
	fmt.Fprintf(w, "multi <= sep: %d of %d plugins in wall time, %d of %d in CPU time\n",
		within[0], len(plugins), within[1], len(plugins))
}
