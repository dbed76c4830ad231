package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/cniforge/plugins/scripts/internal/stats"
)

// inittrace is what one exec's GODEBUG=inittrace=1 lines add up to.
type inittrace struct {
	clock float64            // ms, every package's init
	bytes int64              // allocated by the inits
	pkgs  map[string]float64 // package → its init's clock ms
}

var initLine = regexp.MustCompile(`^init (\S+) @[0-9.]+ ms, ([0-9.]+) ms clock, ([0-9]+) bytes, [0-9]+ allocs$`)

// parseInittrace sums the runtime's inittrace lines in stderr; other lines
// are skipped.
func parseInittrace(stderr []byte) inittrace {
	t := inittrace{pkgs: map[string]float64{}}
	sc := bufio.NewScanner(bytes.NewReader(stderr))
	for sc.Scan() {
		m := initLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		clock, _ := strconv.ParseFloat(m[2], 64) // the regexp admits only numbers
		b, _ := strconv.ParseInt(m[3], 10, 64)
		t.clock += clock
		t.bytes += b
		t.pkgs[m[1]] += clock
	}
	return t
}

func traceInits(folders []folder, plugins []string, n int) (map[string][]inittrace, error) {
	c := calls["version"]
	env := func(p string) []string { return append(c.env(p), "GODEBUG=inittrace=1") }
	traces := map[string][]inittrace{}
	for round := range n {
		for _, p := range plugins {
			for _, f := range inTurn(folders, round, p) {
				path := filepath.Join(f.dir, p)
				_, stderr, err := execOnce(path, env(p), nil, c.check)
				if err != nil {
					return nil, err
				}
				t := parseInittrace(stderr)
				if len(t.pkgs) == 0 {
					return nil, fmt.Errorf("%s: no inittrace lines on stderr: %q", path, stderr)
				}
				traces[key(p, f.label)] = append(traces[key(p, f.label)], t)
			}
		}
	}
	return traces, nil
}

// extra is a package only the multicall initialises, with its median
// clock ms.
type extra struct {
	pkg string
	ms  float64
}

// onlyIn lists the packages a's inits have and b's do not, heaviest
// (median clock over a's execs) first.
func onlyIn(a, b []inittrace) []extra {
	var out []extra
	for pkg := range a[0].pkgs {
		if _, ok := b[0].pkgs[pkg]; ok {
			continue
		}
		v := make([]float64, len(a))
		for i, t := range a {
			v[i] = t.pkgs[pkg]
		}
		out = append(out, extra{pkg, stats.Median(v)})
	}
	slices.SortFunc(out, func(x, y extra) int {
		if c := -cmpFloat(x.ms, y.ms); c != 0 {
			return c
		}
		return strings.Compare(x.pkg, y.pkg)
	})
	return out
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func printTraces(w io.Writer, folders []folder, plugins []string, traces map[string][]inittrace, faults map[string][]float64, verbose bool) {
	hdr := fmt.Sprintf("%-12s", "plugin")
	for _, f := range folders {
		hdr += fmt.Sprintf(" %9s %6s %4s %6s", "init "+f.label, "KiB", "pkgs", "faults")
	}
	fmt.Fprintln(w, hdr+"  only in multi (ms), heaviest")
	for _, p := range plugins {
		row := fmt.Sprintf("%-12s", p)
		for _, f := range folders {
			v, ok := traces[key(p, f.label)]
			if !ok {
				row += fmt.Sprintf(" %9s %6s %4s %6s", "-", "-", "-", "-")
				continue
			}
			clock, kib := make([]float64, len(v)), make([]float64, len(v))
			for i, t := range v {
				clock[i], kib[i] = t.clock, float64(t.bytes)/1024
			}
			r := "-"
			if len(faults[key(p, f.label)]) > 0 {
				r = fmt.Sprintf("%.0f", stats.Median(faults[key(p, f.label)]))
			}
			row += fmt.Sprintf(" %9.3f %6.0f %4d %6s", stats.Median(clock), stats.Median(kib), len(v[0].pkgs), r)
		}
		extras := onlyIn(traces[key(p, "multi")], traces[key(p, "sep")])
		var sum float64
		var names []string
		for i, e := range extras {
			sum += e.ms
			if verbose || i < 3 {
				names = append(names, fmt.Sprintf("%s %.3f", strings.TrimPrefix(e.pkg, "github.com/"), e.ms))
			}
		}
		if len(extras) > 0 {
			row += fmt.Sprintf("  %d pkgs %.3f: %s", len(extras), sum, strings.Join(names, ", "))
		}
		fmt.Fprintln(w, row)
	}
}
