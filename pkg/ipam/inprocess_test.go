package ipam

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/pkg/result"
	"github.com/cniforge/plugins/pkg/testutil"
	hostlocal "github.com/cniforge/plugins/plugins/ipam/host-local"
	"github.com/cniforge/plugins/plugins/ipam/static"
)

// execdMarker is what this test binary prints when a test mistakenly execs
// it as a plugin (a delegate that should have run in-process).
const execdMarker = "pkg/ipam test binary exec'd as a plugin"

func TestMain(m *testing.M) {
	if os.Getenv("CNI_COMMAND") != "" {
		fmt.Printf(`{"code": 999, "msg": %q}`, execdMarker)
		os.Exit(1)
	}
	plugin.Register(hostlocal.Plugin, static.Plugin, panicky, notInProcess)
	os.Exit(m.Run())
}

var panicky = plugin.Plugin{
	Name: "panicky", Versions: plugin.AllVersions, InProcess: true,
	Funcs: skel.CNIFuncs{Add: func(*skel.CmdArgs) error { panic("boom") }},
}

// notInProcess prints to os.Stdout itself: it must never run in-process.
var notInProcess = plugin.Plugin{Name: "printer", Versions: plugin.AllVersions}

// link makes dir/name a symlink to target.
func link(t *testing.T, dir, name, target string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func self(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func builtBinary(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(testutil.BinDir(), name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s missing (run ./build_linux.sh first): %v", p, err)
	}
	return p
}

func newExec(ran *[]string) *sameBinaryExec {
	return &sameBinaryExec{
		Exec: &invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: os.Stderr}, PluginDecoder: version.PluginDecoder{}},
		self: selfID,
		ran:  func(name string) { *ran = append(*ran, name) },
	}
}

// step is one call of a delegate: what invoke would hand the exec.
type step struct {
	name  string
	env   map[string]string
	stdin string
}

// outcome is what came back: stdout bytes, or the error's fields.
type outcome struct {
	Stdout string
	Err    *types.Error
	Other  string // an error that is not a *types.Error
}

func run(e invoke.Exec, path string, s step) outcome {
	env := []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range s.env {
		env = append(env, k+"="+v)
	}
	out, err := e.ExecPlugin(context.Background(), path, []byte(s.stdin), env)
	o := outcome{Stdout: string(out)}
	var ce *types.Error
	if errors.As(err, &ce) {
		o.Err = ce
	} else if err != nil {
		o.Other = err.Error()
	}
	return o
}

func hostLocalSteps(dataDir string) []step {
	conf := func(ver string, extra string) string {
		return fmt.Sprintf(`{"cniVersion":%q,"name":"inproc","type":"bridge"%s,"ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"10.77.0.0/29","rangeStart":"10.77.0.2","rangeEnd":"10.77.0.3"}]],"routes":[{"dst":"0.0.0.0/0"}]}}`,
			ver, extra, dataDir)
	}
	env := func(cmd, id string) map[string]string {
		return map[string]string{"CNI_COMMAND": cmd, "CNI_CONTAINERID": id, "CNI_NETNS": "/nonexistent/netns",
			"CNI_IFNAME": "eth0", "CNI_PATH": "/nonexistent"}
	}
	with := func(m map[string]string, k, v string) map[string]string {
		m[k] = v
		return m
	}
	prev := `,"prevResult":{"cniVersion":"1.0.0","ips":[{"address":"10.77.0.2/29"}]}`
	return []step{
		{"VERSION", env("VERSION", "a"), ""},
		{"ADD 1.0.0", env("ADD", "a"), conf("1.0.0", "")},
		{"ADD 0.2.0", env("ADD", "b"), conf("0.2.0", "")},
		{"ADD exhausted", env("ADD", "c"), conf("1.1.0", "")},
		{"CHECK", env("CHECK", "a"), conf("1.0.0", prev)},
		{"CHECK wrong owner", env("CHECK", "b"), conf("1.0.0", prev)},
		{"CHECK 0.3.1", env("CHECK", "a"), conf("0.3.1", "")},
		{"STATUS exhausted", env("STATUS", ""), conf("1.1.0", "")},
		{"STATUS 1.0.0", env("STATUS", ""), conf("1.0.0", "")},
		{"GC 1.0.0", env("GC", ""), conf("1.0.0", "")},
		{"GC keeps a", env("GC", ""), conf("1.1.0", `,"cni.dev/valid-attachments":[{"containerID":"a","ifname":"eth0"}]`)},
		{"GC bad entry", env("GC", ""), conf("1.1.0", `,"cni.dev/valid-attachments":[null]`)},
		{"DEL a", env("DEL", "a"), conf("1.0.0", "")},
		{"DEL a again", env("DEL", "a"), conf("1.0.0", "")},
		{"DEL no netns", with(env("DEL", "a"), "CNI_NETNS", ""), conf("1.0.0", "")},
		{"STATUS", env("STATUS", ""), conf("1.1.0", "")},
		{"ADD netns is ours", with(env("ADD", "d"), "CNI_NETNS", "/proc/self/ns/net"), conf("1.0.0", "")},
		{"ADD netns override", with(with(env("ADD", "e"), "CNI_NETNS", "/proc/self/ns/net"), "CNI_NETNS_OVERRIDE", "1"), conf("1.0.0", "")},
		{"bad ipam", env("ADD", "f"), `{"cniVersion":"1.0.0","name":"inproc","ipam":{"type":"host-local","ranges":[[{"subnet":"10.77.0.0"}]]}}`},
		{"no name", env("ADD", "f"), `{"cniVersion":"1.0.0","ipam":{"type":"host-local"}}`},
		{"bad name", env("ADD", "f"), `{"cniVersion":"1.0.0","name":"a/b"}`},
		{"bad json", env("ADD", "f"), `{"cniVersion":`},
		{"future version", env("ADD", "f"), conf("9.9.9", "")},
		{"bad version", env("ADD", "f"), conf("x", "")},
		{"missing env", with(with(env("ADD", "f"), "CNI_IFNAME", ""), "CNI_PATH", ""), conf("1.0.0", "")},
		{"bad container id", env("ADD", "f/g"), conf("1.0.0", "")},
		{"bad ifname", with(env("DEL", "f"), "CNI_IFNAME", "a/b"), conf("1.0.0", "")},
		{"unknown command", env("FROB", "f"), conf("1.0.0", "")},
		{"no command", with(env("ADD", "f"), "CNI_COMMAND", ""), conf("1.0.0", "")},
	}
}

// An in-process host-local answers every call byte for byte as the exec'd
// host-local binary does: results in each version, CNI errors with their
// codes, messages and details, and the state it leaves (later steps see
// earlier reservations).
func TestInProcessMatchesExec(t *testing.T) {
	var ran []string
	e := newExec(&ran)
	dataDir := filepath.Join(t.TempDir(), "data")
	inDir, exDir := t.TempDir(), t.TempDir()
	inPath := link(t, inDir, "host-local", self(t))
	exPath := link(t, exDir, "host-local", builtBinary(t, "host-local"))

	steps := hostLocalSteps(dataDir)
	var got [2][]outcome
	for i, path := range []string{exPath, inPath} {
		if err := os.RemoveAll(dataDir); err != nil {
			t.Fatal(err)
		}
		for _, s := range steps {
			got[i] = append(got[i], run(e, path, s))
		}
	}
	if len(ran) != len(steps) {
		t.Fatalf("%d of %d calls ran in-process, want all of the second round: %v", len(ran), len(steps), ran)
	}
	for i, s := range steps {
		ex, in := got[0][i], got[1][i]
		exJ, _ := json.Marshal(ex)
		inJ, _ := json.Marshal(in)
		if !bytes.Equal(exJ, inJ) {
			t.Errorf("%s:\n exec'd:     %s\n in-process: %s", s.name, exJ, inJ)
		}
		if testing.Verbose() {
			t.Logf("%s: %s", s.name, inJ)
		}
	}
	// The sequence is only worth comparing if it reaches both outcomes.
	var oks, errs int
	for _, o := range got[1] {
		if o.Err != nil {
			errs++
		} else {
			oks++
		}
	}
	if oks < 8 || errs < 12 {
		t.Errorf("%d successes, %d errors: the steps no longer exercise both", oks, errs)
	}
}

// static, too (no state, but CNI_ARGS and its own errors).
func TestInProcessStaticMatchesExec(t *testing.T) {
	var ran []string
	e := newExec(&ran)
	inPath := link(t, t.TempDir(), "static", self(t))
	exPath := link(t, t.TempDir(), "static", builtBinary(t, "static"))
	env := map[string]string{"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "a", "CNI_NETNS": "/nonexistent",
		"CNI_IFNAME": "eth0", "CNI_PATH": "/nonexistent", "CNI_ARGS": "IP=10.1.2.3/24;GATEWAY=10.1.2.1"}
	for _, s := range []step{
		{"ADD CNI_ARGS", env, `{"cniVersion":"1.0.0","name":"s","ipam":{"type":"static"}}`},
		{"ADD 0.3.1", env, `{"cniVersion":"0.3.1","name":"s","ipam":{"type":"static","addresses":[{"address":"10.9.9.9/24"}]}}`},
		{"ADD bad", env, `{"cniVersion":"1.0.0","name":"s","ipam":{"type":"static","addresses":[{"address":"10.9.9.9"}]}}`},
	} {
		ex, in := run(e, exPath, s), run(e, inPath, s)
		exJ, _ := json.Marshal(ex)
		inJ, _ := json.Marshal(in)
		if !bytes.Equal(exJ, inJ) {
			t.Errorf("%s:\n exec'd:     %s\n in-process: %s", s.name, exJ, inJ)
		}
	}
	if len(ran) != 3 {
		t.Errorf("ran in-process: %v, want static 3 times", ran)
	}
}

// A binary of the same name that is not this executable is exec'd: here a
// copy of this very test binary (another inode) and a plugin that does not
// allow in-process runs. Exec'ing this test binary prints execdMarker.
func TestForeignBinaryIsExeced(t *testing.T) {
	var ran []string
	e := newExec(&ran)
	dir := t.TempDir()
	b, err := os.ReadFile(self(t))
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(dir, "host-local")
	if err := os.WriteFile(cp, b, 0o755); err != nil {
		t.Fatal(err)
	}
	printer := link(t, t.TempDir(), "printer", self(t))
	s := step{"ADD", map[string]string{"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "a", "CNI_NETNS": "/x",
		"CNI_IFNAME": "eth0", "CNI_PATH": dir}, `{"cniVersion":"1.0.0","name":"n"}`}
	for _, path := range []string{cp, printer} {
		o := run(e, path, s)
		if o.Err == nil || o.Err.Msg != execdMarker {
			t.Errorf("%s: %+v, want it exec'd (%q)", path, o, execdMarker)
		}
	}
	if len(ran) != 0 {
		t.Errorf("ran in-process: %v, want none", ran)
	}
}

// A delegate that panics in-process ends that call with an error, as a
// crashed child would, and this process carries on.
func TestInProcessPanicIsAnError(t *testing.T) {
	var ran []string
	e := newExec(&ran)
	path := link(t, t.TempDir(), "panicky", self(t))
	o := run(e, path, step{"ADD", map[string]string{"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "a",
		"CNI_NETNS": "/x", "CNI_IFNAME": "eth0", "CNI_PATH": "/x"}, `{"cniVersion":"1.0.0","name":"n"}`})
	if o.Err == nil || !strings.HasPrefix(o.Err.Msg, `netplugin failed: "panic: boom`) || o.Stdout != "" {
		t.Errorf("got %+v, want a netplugin failed error naming the panic", o)
	}
	if len(ran) != 1 {
		t.Errorf("ran in-process: %v", ran)
	}
}

// Through Add/Del as a plugin calls them: CNI_PATH and the CNI_* values
// come from the process environment, as an exec'd delegate's would. The
// traversal guard holds before anything is looked up.
func TestAddDelRunInProcessFromCNIPath(t *testing.T) {
	dir := t.TempDir()
	link(t, dir, "host-local", self(t))
	t.Setenv("CNI_PATH", dir)
	t.Setenv("CNI_CONTAINERID", "ctr")
	t.Setenv("CNI_NETNS", "/nonexistent/netns")
	t.Setenv("CNI_IFNAME", "eth0")
	t.Setenv("CNI_ARGS", "")
	conf := []byte(fmt.Sprintf(`{"cniVersion":"1.0.0","name":"n","ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"10.78.0.0/24"}]]}}`,
		filepath.Join(t.TempDir(), "data")))
	res, err := Add(context.Background(), "host-local", conf)
	if err != nil {
		t.Fatalf("Add: %v", err) // exec'ing this test binary would print execdMarker
	}
	if len(res.IPs) != 1 || res.IPs[0].Address.String() != "10.78.0.2/24" {
		t.Errorf("Add: %+v", res)
	}
	if err := Del(context.Background(), "host-local", conf); err != nil {
		t.Errorf("Del: %v", err)
	}
	if _, err := Add(context.Background(), "../"+filepath.Base(dir)+"/host-local", conf); result.Code(err) != types.ErrInvalidNetworkConfig {
		t.Errorf("Add with a path: %v, want code 7", err)
	}
}
