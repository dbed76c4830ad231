package plugin

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
)

// fake answers each command in a way the frame must pass on as it is: a
// result, nothing, a plain error (code 999), a CNI error of its own.
var fake = Plugin{
	Name: "fake", Summary: "a plugin for the frame's tests", Versions: AllVersions,
	Funcs: skel.CNIFuncs{
		Add: func(args *skel.CmdArgs) error {
			_, err := fmt.Fprintf(os.Stdout, `{"cniVersion":"1.1.0","ifname":%q}`, args.IfName)
			return err
		},
		Del:    func(*skel.CmdArgs) error { return errors.New("plain failure") },
		Check:  func(*skel.CmdArgs) error { return types.NewError(types.ErrTryAgainLater, "busy", "come back") },
		GC:     func(*skel.CmdArgs) error { return nil },
		Status: func(*skel.CmdArgs) error { return nil },
	},
}

// TestMain makes the test binary the fake plugin when frameMode is set:
// "ours" runs it through runProcess; "skel" through what the frame was
// before it (precheck, then skel.PluginMainFuncs on the same stdin), the
// reference runProcess must match.
func TestMain(m *testing.M) {
	switch os.Getenv("FRAME_TEST_MODE") {
	case "ours":
		os.Exit(runProcess(fake))
	case "skel":
		skelReference(fake)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func skelReference(p Plugin) {
	if cmd := os.Getenv("CNI_COMMAND"); cmd != "" && cmd != "VERSION" {
		stdin, err := io.ReadAll(os.Stdin)
		if err != nil {
			panic(err)
		}
		if cniErr := precheck(p.Versions, os.Getenv, stdin); cniErr != nil {
			_ = cniErr.Print()
			os.Exit(1)
		}
		f, err := os.CreateTemp("", "stdin")
		if err != nil {
			panic(err)
		}
		os.Remove(f.Name())
		if _, err := f.Write(stdin); err != nil {
			panic(err)
		}
		if _, err := f.Seek(0, 0); err != nil {
			panic(err)
		}
		os.Stdin = f
	}
	skel.PluginMainFuncs(p.SkelFuncs(), p.Versions, p.About())
}

// A plugin process answers every call exactly as skel did: the same
// stdout, stderr and exit status, for results, the plugin's own errors
// and each of skel's refusals.
func TestProcessMatchesSkel(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	notNS := filepath.Join(t.TempDir(), "netns") // a file, not a namespace
	if err := os.WriteFile(notNS, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	conf := func(ver string) string { return fmt.Sprintf(`{"cniVersion":%q,"name":"n","type":"fake"}`, ver) }
	env := func(cmd string, kv ...string) []string {
		e := []string{"CNI_COMMAND=" + cmd, "CNI_CONTAINERID=c1", "CNI_NETNS=" + notNS, "CNI_IFNAME=eth0", "CNI_PATH=/nonexistent"}
		return append(e, kv...)
	}
	for _, tc := range []struct {
		name  string
		env   []string
		stdin string
	}{
		{"VERSION", env("VERSION"), ""},
		{"ADD", env("ADD"), conf("1.0.0")},
		{"ADD 0.3.1", env("ADD"), conf("0.3.1")},
		{"ADD without cniVersion", env("ADD"), `{"name":"n"}`},
		{"DEL: a plain error", env("DEL"), conf("1.1.0")},
		{"DEL without netns", env("DEL", "CNI_NETNS="), conf("1.1.0")},
		{"CHECK: a CNI error", env("CHECK"), conf("1.0.0")},
		{"CHECK 0.3.1", env("CHECK"), conf("0.3.1")},
		{"GC", env("GC"), conf("1.1.0")},
		{"GC 1.0.0", env("GC"), conf("1.0.0")},
		{"STATUS", env("STATUS"), conf("1.1.0")},
		{"STATUS 0.4.0", env("STATUS"), conf("0.4.0")},
		{"ADD in the plugin's own netns", env("ADD", "CNI_NETNS=/proc/self/ns/net"), conf("1.0.0")},
		{"ADD own netns, override", env("ADD", "CNI_NETNS=/proc/self/ns/net", "CNI_NETNS_OVERRIDE=true"), conf("1.0.0")},
		{"missing variables", env("ADD", "CNI_IFNAME=", "CNI_PATH="), conf("1.0.0")},
		{"DEL needs no netns but an ifname", env("DEL", "CNI_NETNS=", "CNI_IFNAME="), conf("1.0.0")},
		{"bad container ID", env("ADD", "CNI_CONTAINERID=../x"), conf("1.0.0")},
		{"bad ifname", env("CHECK", "CNI_IFNAME=a/b"), conf("1.0.0")},
		{"no name", env("ADD"), `{"cniVersion":"1.0.0"}`},
		{"bad name", env("ADD"), `{"cniVersion":"1.0.0","name":"a/b"}`},
		{"not JSON", env("ADD"), `{"cniVersion":`},
		{"trailing garbage", env("ADD"), conf("1.0.0") + "x"},
		{"wrong type", env("DEL"), `{"cniVersion":"1.0.0","name":5}`},
		{"future version", env("ADD"), conf("9.9.9")},
		{"unknown command", env("FROB"), conf("1.0.0")},
		{"no command: the about text", env(""), conf("1.0.0")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got [2]string
			for i, mode := range []string{"skel", "ours"} {
				cmd := exec.Command(exe)
				cmd.Env = append([]string{"FRAME_TEST_MODE=" + mode}, tc.env...)
				cmd.Stdin = bytes.NewBufferString(tc.stdin)
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				err := cmd.Run()
				var exit *exec.ExitError
				if err != nil && !errors.As(err, &exit) {
					t.Fatal(err)
				}
				got[i] = fmt.Sprintf("exit %d\nstdout: %s\nstderr: %s", cmd.ProcessState.ExitCode(), &stdout, &stderr)
			}
			if got[0] != got[1] {
				t.Errorf("skel:\n%s\nours:\n%s", got[0], got[1])
			}
			if testing.Verbose() {
				t.Log(got[1])
			}
		})
	}
}
