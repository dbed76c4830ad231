// Command testsummary reads `go test -json` on stdin and prints what a
// non-verbose `go test` would (an "ok" line per passing package, the whole
// output of every failing test), then one closing line counting tests:
//
//	host: 812 passed, 0 failed, 8 skipped
//
// Ginkgo suites count their specs (from the suite's summary line), plain Go
// tests count their leaf tests. With -counts FILE it also writes
// "passed failed skipped" there, for test_linux.sh's grand total. It exits 1
// when any test or package failed, or when no test ran at all.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

// ginkgoSummary matches Ginkgo's closing line, e.g.
// "SUCCESS! -- 32 Passed | 0 Failed | 0 Pending | 0 Skipped".
var ginkgoSummary = regexp.MustCompile(`(\d+) Passed \| (\d+) Failed \| (\d+) Pending \| (\d+) Skipped`)

var ansi = regexp.MustCompile(`\x1b\[[0-9;]*m`)

type counts struct{ passed, failed, skipped int }

type pkgState struct {
	output   []string            // every line, printed if the package fails
	tests    map[string]string   // test -> final action
	ginkgo   map[string]bool     // tests that wrap a Ginkgo suite
	testOut  map[string][]string // per-test output, printed for failing tests
	failed   bool
	finished string
	elapsed  float64
}

func main() {
	countsFile := flag.String("counts", "", "write `passed failed skipped` to this file")
	label := flag.String("label", "tests", "word printed before the closing counts")
	flag.Parse()

	pkgs := map[string]*pkgState{}
	var order []string
	var total counts
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			fmt.Println(sc.Text()) // build errors arrive as plain text
			continue
		}
		p := pkgs[ev.Package]
		if p == nil {
			p = &pkgState{tests: map[string]string{}, ginkgo: map[string]bool{}, testOut: map[string][]string{}}
			pkgs[ev.Package] = p
			order = append(order, ev.Package)
		}
		switch ev.Action {
		case "output":
			p.output = append(p.output, ev.Output)
			if ev.Test != "" {
				p.testOut[ev.Test] = append(p.testOut[ev.Test], ev.Output)
			}
			if m := ginkgoSummary.FindStringSubmatch(ansi.ReplaceAllString(ev.Output, "")); m != nil {
				total.passed += atoi(m[1])
				total.failed += atoi(m[2])
				total.skipped += atoi(m[3]) + atoi(m[4])
				if ev.Test != "" {
					p.ginkgo[ev.Test] = true
				}
			}
		case "pass", "fail", "skip":
			if ev.Test != "" {
				p.tests[ev.Test] = ev.Action
				continue
			}
			p.finished, p.elapsed = ev.Action, ev.Elapsed
			p.failed = ev.Action == "fail"
			report(ev.Package, p)
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "testsummary: read: %v\n", err)
		os.Exit(1)
	}

	anyFailed := false
	for _, name := range order {
		p := pkgs[name]
		if p.failed || p.finished == "" && len(p.output) > 0 {
			anyFailed = true
		}
		for test, action := range p.tests {
			if p.ginkgo[test] || hasSubtests(p.tests, test) {
				continue
			}
			switch action {
			case "pass":
				total.passed++
			case "fail":
				total.failed++
			case "skip":
				total.skipped++
			}
		}
	}
	fmt.Printf("%s: %d passed, %d failed, %d skipped\n", *label, total.passed, total.failed, total.skipped)
	if *countsFile != "" {
		data := fmt.Sprintf("%d %d %d\n", total.passed, total.failed, total.skipped)
		if err := os.WriteFile(*countsFile, []byte(data), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "testsummary: %v\n", err)
			os.Exit(1)
		}
	}
	if anyFailed || total.failed > 0 || total.passed == 0 {
		os.Exit(1)
	}
}

func report(pkg string, p *pkgState) {
	switch {
	case p.failed:
		// The output ends with go test's own "FAIL <package>" line.
		fmt.Printf("--- package %s FAILED; its output:\n%s", pkg, strings.Join(p.output, ""))
	case len(p.tests) == 0:
		fmt.Printf("?   \t%s\t[no test files]\n", pkg)
	default:
		fmt.Printf("ok  \t%s\t%.3fs\n", pkg, p.elapsed)
	}
}

// hasSubtests reports whether test has subtests, which are counted instead.
func hasSubtests(tests map[string]string, test string) bool {
	for t := range tests {
		if strings.HasPrefix(t, test+"/") {
			return true
		}
	}
	return false
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s) // the regexp matched digits only
	return n
}
