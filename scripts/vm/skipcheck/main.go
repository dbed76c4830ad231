// Command skipcheck reads a Ginkgo JSON report written inside the VM lane
// and fails unless every spec labelled "kernel" ran and passed: the lane
// exists to run those specs, so a skipped one is a lane failure, not a pass.
//
//	skipcheck REPORT.json
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/onsi/ginkgo/v2/types"

	"github.com/cniforge/plugins/pkg/kernelfeature"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: skipcheck REPORT.json")
		os.Exit(2)
	}
	if err := check(os.Args[1]); err != nil {
		fmt.Fprintf(os.Stderr, "skipcheck: %v\n", err)
		os.Exit(1)
	}
}

func check(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var reports []types.Report
	if err := json.Unmarshal(b, &reports); err != nil {
		return fmt.Errorf("parse %s: %w", path, err)
	}
	ran, bad := 0, 0
	for _, r := range reports {
		for _, s := range r.SpecReports {
			if s.LeafNodeType != types.NodeTypeIt || !slices.Contains(s.Labels(), kernelfeature.Label) {
				continue
			}
			if s.State == types.SpecStatePassed {
				ran++
				continue
			}
			bad++
			fmt.Fprintf(os.Stderr, "skipcheck: %s: %q %s in the VM lane: %s\n",
				r.SuitePath, s.FullText(), s.State, s.Failure.Message)
		}
	}
	if bad > 0 {
		return fmt.Errorf("%s: %d kernel spec(s) did not pass (a kernel spec must run, not skip, in the VM lane)", path, bad)
	}
	if ran == 0 {
		return fmt.Errorf("%s: no spec labelled %q ran", path, kernelfeature.Label)
	}
	fmt.Printf("skipcheck: %d kernel spec(s) ran and passed\n", ran)
	return nil
}
