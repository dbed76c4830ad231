package hostlocal

import (
	"errors"
	"fmt"
	"github.com/containernetworking/cni/pkg/types"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// Crash tests run a command in a child process (this test binary, re-run)
// that exits the moment a given step is done: the state on disk is then
// exactly what a crash there leaves, with no defer or undo run.
const (
	crashStepEnv = "HOSTLOCAL_CRASH_AT"
	crashCmdEnv  = "HOSTLOCAL_CRASH_CMD"
	crashConfEnv = "HOSTLOCAL_CRASH_CONF"
	crashedCode  = 3
)

func TestMain(m *testing.M) {
	if step := os.Getenv(crashStepEnv); step != "" {
		crashChild(step)
	}
	os.Exit(m.Run())
}

func crashChild(step string) {
	c, err := parseAddConfig([]byte(os.Getenv(crashConfEnv)), "")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	opts := options{afterStep: func(s string) {
		if s == step {
			os.Exit(crashedCode)
		}
	}}
	switch os.Getenv(crashCmdEnv) {
	case "ADD":
		_, err = addWith(c, "b", "eth0", quiet, opts)
	case "DEL":
		err = delWith(c, "b", "eth0", opts)
	default:
		err = errors.New("unknown command")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0) // the step never came
}

// crashDuring runs cmd for container "b" in a child that dies after step.
func crashDuring(cmd, step string, stdin []byte) {
	GinkgoHelper()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), crashStepEnv+"="+step, crashCmdEnv+"="+cmd, crashConfEnv+"="+string(stdin))
	out, err := child.CombinedOutput()
	var exitErr *exec.ExitError
	Expect(errors.As(err, &exitErr)).To(BeTrue(), "child ended without crashing: %v %s", err, out)
	Expect(exitErr.ExitCode()).To(Equal(crashedCode), "child output: %s", out)
}

var _ = Describe("a crash at any step", func() {
	var (
		dataDir string
		stdin   []byte
		c       *Config
	)
	BeforeEach(func() {
		dataDir = GinkgoT().TempDir()
		stdin = conf("1.1.0", dataDir, ranges("10.1.0.0/24", "fd00::/64"), nil)
		c = mustParse(stdin, "")
		_, err := add(c, "a", "eth0", quiet) // 10.1.0.2, fd00::2
		Expect(err).NotTo(HaveOccurred())
	})

	aOnly := map[string]string{"10.1.0.2": "a\r\neth0", "fd00::2": "a\r\neth0"}

	expectHealthy := func() {
		GinkgoHelper()
		Expect(check(c, "a", "eth0", prevWith("10.1.0.2/24", "fd00::2/64"))).To(Succeed())
		// No temp file outlives the repair.
		tmps, err := filepath.Glob(filepath.Join(dataDir, testNet, metaName, "tmp.*"))
		Expect(err).NotTo(HaveOccurred())
		Expect(tmps).To(BeEmpty())
		// New attachments still get distinct addresses, and leave cleanly.
		res, err := add(c, "c", "eth0", quiet)
		Expect(err).NotTo(HaveOccurred())
		Expect(addrsOf(res)).NotTo(ContainElement("10.1.0.2/24"))
		Expect(del(c, "c", "eth0")).To(Succeed())
		Expect(del(c, "a", "eth0")).To(Succeed())
		Expect(reservations(dataDir)).To(BeEmpty())
		Expect(naming(dataDir, "a")).To(BeEmpty())
		Expect(naming(dataDir, "c")).To(BeEmpty())
	}

	addSteps := []string{"invalidate", "claim 10.1.0.3", "reserve 10.1.0.3", "claim fd00::3", "reserve fd00::3", "index"}

	for _, step := range addSteps {
		It(fmt.Sprintf("of ADD (after %q) is put right by DEL", step), func() {
			crashDuring("ADD", step, stdin)
			Expect(del(c, "b", "eth0")).To(Succeed())
			Expect(reservations(dataDir)).To(Equal(aOnly))
			Expect(naming(dataDir, "b")).To(BeEmpty())
			Expect(del(c, "b", "eth0")).To(Succeed(), "a second DEL")
			Expect(naming(dataDir, "b")).To(BeEmpty())
			expectHealthy()
		})

		It(fmt.Sprintf("of ADD (after %q) is put right by GC", step), func() {
			crashDuring("ADD", step, stdin)
			gcConf := mustParse(conf("1.1.0", dataDir, ranges("10.1.0.0/24", "fd00::/64"), nil), "")
			Expect(gc(gcConf, []types.GCAttachment{{ContainerID: "a", IfName: "eth0"}})).To(Succeed())
			Expect(reservations(dataDir)).To(Equal(aOnly))
			Expect(naming(dataDir, "b")).To(BeEmpty())
			expectHealthy()
		})
	}

	for _, step := range []string{"invalidate", "release 10.1.0.3", "release fd00::3", "index"} {
		It(fmt.Sprintf("of DEL (after %q) is put right by the next DEL", step), func() {
			_, err := add(c, "b", "eth0", quiet) // 10.1.0.3, fd00::3
			Expect(err).NotTo(HaveOccurred())
			crashDuring("DEL", step, stdin)
			Expect(del(c, "b", "eth0")).To(Succeed())
			Expect(reservations(dataDir)).To(Equal(aOnly))
			Expect(naming(dataDir, "b")).To(BeEmpty())
			// b can come back.
			_, err = add(c, "b", "eth0", quiet)
			Expect(err).NotTo(HaveOccurred())
			Expect(del(c, "b", "eth0")).To(Succeed())
			Expect(naming(dataDir, "b")).To(BeEmpty())
			expectHealthy()
		})
	}
})
