// Package kernelfeature tells kernel-dependent tests whether the running
// kernel can do what they need (ipvlan, 802.1Q vlan, bridge VLAN filtering,
// dummy, vrf, br_netfilter), so a spec skips with the reason on a kernel
// that cannot and runs for real in the VM lane (scripts/vmtest.sh), whose
// Debian kernel can.
//
// A kernel-dependent spec carries Label(kernelfeature.Label) and starts with
// Require:
//
//	It("puts the container on vlan 100", Label(kernelfeature.Label), func() {
//		kernelfeature.Require(kernelfeature.VLAN)
//		...
//	})
//
// test_linux.sh runs the specs labelled Label in the VM lane with
// CNIFORGE_VM_LANE=1 set; there a missing feature fails the spec instead of
// skipping it, so the lane can never pass by skipping.
//
// Every probe runs in a network namespace of its own, made and removed by
// the probe: never in the test process's namespace.
package kernelfeature

import (
	"fmt"
	"os"
	"sync"

	"github.com/onsi/ginkgo/v2"
)

// Label marks the Ginkgo specs that need a kernel feature this package
// probes; test_linux.sh runs them in the VM lane with --ginkgo.label-filter.
const Label = "kernel"

// LaneEnv is set to "1" by the VM lane: a missing feature then fails the
// spec, since the lane exists to run every kernel spec.
const LaneEnv = "CNIFORGE_VM_LANE"

// Feature is one kernel capability a test may need.
type Feature struct {
	// Name says what the kernel lacks in a skip message: "ipvlan".
	Name string
	// Tries is what the probe does, for the skip message: "creating an
	// ipvlan link (l2 and l3)".
	Tries string
	probe func(p *prober) error
}

var (
	results = map[string]error{}
	mu      sync.Mutex
)

// Probe reports whether the running kernel has f: nil when it has, else what
// failed. The probe runs once per process in a namespace it makes and
// removes; later calls return the first answer.
func Probe(f Feature) error {
	mu.Lock()
	defer mu.Unlock()
	if err, ok := results[f.Name]; ok {
		return err
	}
	err := runProbe(f)
	results[f.Name] = err
	return err
}

// InLane reports whether this process runs inside the VM lane.
func InLane() bool { return os.Getenv(LaneEnv) == "1" }

// Require skips the current spec unless the kernel has every feature in fs;
// inside the VM lane it fails the spec instead. Call it at the start of a
// spec or in a BeforeEach of specs labelled Label.
func Require(fs ...Feature) {
	ginkgo.GinkgoHelper()
	for _, f := range fs {
		msg, fail := verdict(f, Probe(f), InLane())
		if msg == "" {
			continue
		}
		if fail {
			ginkgo.Fail(msg)
		}
		recordSkip(f)
		ginkgo.Skip(msg)
	}
}

// verdict turns a probe result into what Require does: nothing (empty msg),
// skip with msg, or fail with msg (inside the lane).
func verdict(f Feature, probeErr error, inLane bool) (msg string, fail bool) {
	if probeErr == nil {
		return "", false
	}
	if inLane {
		return fmt.Sprintf("kernel lacks %s inside the VM lane (%s=1): %s failed: %v; the lane must run every kernel spec, so this is a lane defect (kernel package or module preload in scripts/vm/init)",
			f.Name, LaneEnv, f.Tries, probeErr), true
	}
	return fmt.Sprintf("kernel lacks %s (%s failed: %v); runs in the VM lane: scripts/vmtest.sh (see scripts/vm/README.md)",
		f.Name, f.Tries, probeErr), false
}

// SkipLogEnv names a file to which Require appends one line per spec it
// skips. test_linux.sh reads it to credit exactly those specs to the VM
// lane, which runs every kernel spec and fails unless all pass; a host
// kernel that has the features records nothing, so nothing is counted twice.
const SkipLogEnv = "CNIFORGE_KERNEL_SKIPS"

func recordSkip(f Feature) {
	path := os.Getenv(SkipLogEnv)
	if path == "" {
		return
	}
	file, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		ginkgo.Fail(fmt.Sprintf("%s: %v", SkipLogEnv, err))
	}
	defer file.Close()
	// One short O_APPEND write per line: whole even with test binaries of
	// several packages appending at once.
	if _, err := fmt.Fprintf(file, "%s\t%s\n", f.Name, ginkgo.CurrentSpecReport().FullText()); err != nil {
		ginkgo.Fail(fmt.Sprintf("%s: %v", SkipLogEnv, err))
	}
}
