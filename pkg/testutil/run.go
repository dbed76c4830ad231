package testutil

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/onsi/ginkgo/v2"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/plugin"
)

// CNIVersions is every spec version a cniforge plugin accepts, oldest first.
var CNIVersions = []string{"0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}

// Call is one plugin invocation: the CNI_* environment and stdin.
type Call struct {
	Command     string // ADD, DEL, CHECK, GC, STATUS, VERSION
	ContainerID string
	Netns       string
	IfName      string
	Args        string // CNI_ARGS
	Path        string // CNI_PATH; empty means BinDir()
	Stdin       []byte
	// Env adds or overrides variables; a key mapped to "" is unset.
	Env map[string]string
	// Dir is the working folder of an exec'd plugin ("" = the test's).
	Dir string
}

// NewCall is cmd for the attachment (containerID, ifName) in n; a nil n
// leaves CNI_NETNS empty, as a runtime's DEL of a gone netns does.
func NewCall(cmd, containerID, ifName string, n *ns.NetNS, stdin []byte) Call {
	c := Call{Command: cmd, ContainerID: containerID, IfName: ifName, Stdin: stdin}
	if n != nil {
		c.Netns = n.Path()
	}
	return c
}

func (c Call) environ() map[string]string {
	path := c.Path
	if path == "" {
		path = BinDir()
	}
	env := map[string]string{
		"CNI_COMMAND":     c.Command,
		"CNI_CONTAINERID": c.ContainerID,
		"CNI_NETNS":       c.Netns,
		"CNI_IFNAME":      c.IfName,
		"CNI_ARGS":        c.Args,
		"CNI_PATH":        path,
	}
	for k, v := range c.Env {
		env[k] = v
	}
	return env
}

// Output is what a plugin printed and how it ended.
type Output struct {
	Stdout []byte
	Stderr []byte // only for Exec
	// Err is the CNI error the plugin reported, or nil on success.
	Err *types.Error
}

// runMu serialises in-process runs: they swap process-wide state (the
// environment, os.Stdin and os.Stdout).
var runMu sync.Mutex

// Run runs p in-process through skel, exactly as its binary would, and
// returns what it printed. The plugin works in the network namespace of the
// calling thread, so call Run inside hostNS.Do.
func Run(p plugin.Plugin, c Call) (Output, error) {
	RecordCall(c)
	runMu.Lock()
	defer runMu.Unlock()

	restoreEnv, err := setEnv(c.environ())
	if err != nil {
		return Output{}, err
	}
	defer restoreEnv()

	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return Output{}, err
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return Output{}, err
	}
	go func() {
		_, _ = stdinW.Write(c.Stdin) // a short write shows up as a decode error
		stdinW.Close()
	}()
	outc := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(stdoutR) // ends when stdoutW is closed below
		outc <- b
	}()

	oldIn, oldOut := os.Stdin, os.Stdout
	os.Stdin, os.Stdout = stdinR, stdoutW
	cniErr := skel.PluginMainFuncsWithError(p.SkelFuncs(), p.Versions, p.About())
	if cniErr != nil {
		_ = cniErr.Print() // as skel.PluginMainFuncs does, to our pipe
	}
	os.Stdin, os.Stdout = oldIn, oldOut
	stdoutW.Close()
	stdinR.Close()
	out := Output{Stdout: <-outc, Err: cniErr}
	stdoutR.Close()
	return out, nil
}

func setEnv(env map[string]string) (func(), error) {
	old := map[string]*string{}
	for k, v := range env {
		if prev, ok := os.LookupEnv(k); ok {
			old[k] = &prev
		} else {
			old[k] = nil
		}
		var err error
		if v == "" {
			err = os.Unsetenv(k)
		} else {
			err = os.Setenv(k, v)
		}
		if err != nil {
			return nil, err
		}
	}
	return func() {
		for k, v := range old {
			if v == nil {
				os.Unsetenv(k)
			} else {
				os.Setenv(k, *v)
			}
		}
	}, nil
}

// Exec runs the built binary bin/<name> with c and returns what it printed.
// The child starts in the network namespace of the calling thread, so call
// Exec inside hostNS.Do.
func Exec(name string, c Call) (Output, error) {
	cmd, err := command(name, c)
	if err != nil {
		return Output{}, err
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	out := Output{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	var exitErr *exec.ExitError
	if errors.As(runErr, &exitErr) {
		out.Err, err = cniError(name, exitErr, out)
		return out, err
	}
	return out, runErr
}

// command prepares bin/<name> with c's environment (and PATH) and stdin.
func command(name string, c Call) (*exec.Cmd, error) {
	RecordCall(c)
	path := filepath.Join(BinDir(), name)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("plugin binary %s missing (run ./build_linux.sh first): %w", path, err)
	}
	cmd := exec.Command(path)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range c.environ() {
		if v != "" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	cmd.Stdin = bytes.NewReader(c.Stdin)
	cmd.Dir = c.Dir
	return cmd, nil
}

// cniError decodes the CNI error JSON a plugin that exited non-zero printed.
func cniError(name string, exitErr *exec.ExitError, out Output) (*types.Error, error) {
	e := &types.Error{}
	if err := json.Unmarshal(out.Stdout, e); err != nil {
		return e, fmt.Errorf("%s exited %d without CNI error JSON: %q (stderr %q)",
			name, exitErr.ExitCode(), out.Stdout, out.Stderr)
	}
	return e, nil
}

// BinDir is where build_linux.sh puts the plugin binaries: $CNIFORGE_BIN,
// else bin/ at the repository root.
func BinDir() string {
	if d := os.Getenv("CNIFORGE_BIN"); d != "" {
		return d
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "bin"
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "bin")
}

// VersionEntries is CNIVersions as Ginkgo table entries, each passing the
// version string: DescribeTableSubtree("...", func(ver string) {...}, VersionEntries()).
func VersionEntries() []ginkgo.TableEntry {
	entries := make([]ginkgo.TableEntry, 0, len(CNIVersions))
	for _, v := range CNIVersions {
		entries = append(entries, ginkgo.Entry(v, v))
	}
	return entries
}
