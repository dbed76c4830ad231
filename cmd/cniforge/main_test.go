package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/all"
)

func TestVersionListsEveryPlugin(t *testing.T) {
	out, err := exec.Command(testutil.Multicall(t), "version").Output()
	if err != nil {
		t.Fatalf("cniforge version: %v", err)
	}
	want := "plugins: " + strings.Join(plugin.Names(all.Plugins()), " ") + "\n"
	if !strings.Contains(string(out), want) {
		t.Errorf("cniforge version printed %q, want a line %q", out, want)
	}
	if !strings.HasPrefix(string(out), "cniforge ") {
		t.Errorf("cniforge version printed %q, want it to start with the version", out)
	}
}

// Without CNI_COMMAND a plugin prints its about text: so each link name and
// each `cniforge <plugin>` must reach that plugin, not another one.
func TestArgv0AndArgumentPickThePlugin(t *testing.T) {
	bin := testutil.Multicall(t)
	dir := t.TempDir()
	for _, p := range all.Plugins() {
		link := filepath.Join(dir, p.Name)
		if err := os.Symlink(bin, link); err != nil {
			t.Fatal(err)
		}
		for _, cmd := range []*exec.Cmd{exec.Command(link), exec.Command(bin, p.Name)} {
			cmd.Env = []string{}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("%v: %v: %s", cmd.Args, err, out)
				continue
			}
			if !strings.HasPrefix(string(out), "CNI "+p.Name+" plugin ") {
				t.Errorf("%v printed %q, want %s's about text", cmd.Args, out, p.Name)
			}
		}
	}
}

func TestUnknownCommandFails(t *testing.T) {
	cmd := exec.Command(testutil.Multicall(t), "no-such-plugin")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Fatalf("cniforge no-such-plugin: %v, want exit 2", err)
	}
	if !strings.Contains(string(out), `unknown command or plugin "no-such-plugin"`) {
		t.Errorf("printed %q", out)
	}
}

// The node tool's verbs take flags only: a stray argument (a mistyped flag
// without its dashes, say) is refused with exit 2, naming the verb and the
// argument, before anything is read or written.
func TestVerbsRefuseAStrayArgument(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"install", "--dir", dir, "force"},
		{"gc", "--conf-dir", dir, "force"},
		{"doctor", "--conf-dir", dir, "force"},
		{"check", "--conf-dir", dir, "force"},
		{"ls", "--conf-dir", dir, "force"},
	} {
		var stdout, stderr bytes.Buffer
		rc := run(args, all.Plugins(), &stdout, &stderr)
		want := "cniforge " + args[0] + `: unexpected argument "force"`
		if rc != 2 || !strings.Contains(stderr.String(), want) || stdout.Len() > 0 {
			t.Errorf("cniforge %s: exit %d, stdout %q, stderr %q; want exit 2 and %q",
				strings.Join(args, " "), rc, stdout.String(), stderr.String(), want)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) > 0 {
		t.Errorf("a refused verb wrote into %s: %v", dir, ents)
	}
}

// A plugin's subcommands (dhcp's daemon) answer through a link named for the
// plugin and through `cniforge <plugin>`, as from the separate binary: dhcp
// is in cniforge-dhcp, which cniforge runs from beside itself.
func TestSubcommandsReachThePlugin(t *testing.T) {
	bin := testutil.Multicall(t)
	link := filepath.Join(t.TempDir(), "dhcp")
	if err := os.Symlink(bin, link); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []*exec.Cmd{
		exec.Command(filepath.Join(testutil.BinDir(), "dhcp"), "daemon", "-h"),
		exec.Command(link, "daemon", "-h"),
		exec.Command(bin, "dhcp", "daemon", "-h"),
	} {
		cmd.Env = []string{}
		out, _ := cmd.CombinedOutput() // -h exits non-zero by flag's convention
		if !strings.Contains(string(out), "Usage of dhcp daemon") || !strings.Contains(string(out), "-socketpath") {
			t.Errorf("%v printed %q, want the dhcp daemon's usage", cmd.Args, out)
		}
	}
}

// Asked for dhcp with no cniforge-dhcp beside it (cniforge copied alone),
// cniforge says where dhcp is: to a runtime as CNI error JSON (code 7, exit
// 1), on its command line on stderr (exit 2).
func TestDHCPWithoutItsCompanion(t *testing.T) {
	b, err := os.ReadFile(testutil.Multicall(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "cniforge")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "dhcp")
	if err := os.Symlink("cniforge", link); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(link)
	cmd.Env = []string{"CNI_COMMAND=VERSION"}
	cmd.Stdin = strings.NewReader(`{"cniVersion":"1.0.0"}`)
	out, err := cmd.Output()
	var e struct {
		Code    uint   `json:"code"`
		Details string `json:"details"`
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || json.Unmarshal(out, &e) != nil || e.Code != 7 ||
		!strings.Contains(e.Details, "dhcp is in cniforge-dhcp, which must be beside cniforge") {
		t.Errorf("dhcp VERSION without cniforge-dhcp: %v %q, want exit 1 and code 7 saying where dhcp is", err, out)
	}
	cmd = exec.Command(bin, "dhcp", "daemon")
	cmd.Env = []string{}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), "dhcp is in cniforge-dhcp") {
		t.Errorf("cniforge dhcp daemon without cniforge-dhcp: %v %q, want exit 2 saying where dhcp is", err, stderr.String())
	}
}

// A runtime that runs the binary under a name that is no plugin of it (a
// config's type linked to cniforge, or "cniforge" itself) gets CNI error
// JSON with a code, not usage text.
func TestUnknownNameAnswersARuntimeWithACodedError(t *testing.T) {
	bin := testutil.Multicall(t)
	link := filepath.Join(t.TempDir(), "no-such-plugin")
	if err := os.Symlink(bin, link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		argv []string
		name string
	}{
		{[]string{link}, "no-such-plugin"},
		{[]string{bin}, "cniforge"},
	} {
		cmd := exec.Command(c.argv[0], c.argv[1:]...)
		cmd.Env = []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_NETNS=/run/netns/x", "CNI_IFNAME=eth0", "CNI_PATH=/opt/cni/bin"}
		cmd.Stdin = strings.NewReader(`{"cniVersion":"1.0.0","name":"n","type":"` + c.name + `"}`)
		var stdout bytes.Buffer
		cmd.Stdout = &stdout
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Errorf("%s with CNI_COMMAND=ADD: %v, want exit 1", c.name, err)
		}
		var e struct {
			Code uint   `json:"code"`
			Msg  string `json:"msg"`
		}
		if err := json.Unmarshal(stdout.Bytes(), &e); err != nil || e.Code != 7 || !strings.Contains(e.Msg, `type "`+c.name+`"`) {
			t.Errorf("%s with CNI_COMMAND=ADD printed %q (%v), want CNI error JSON, code 7, naming the type", c.name, stdout.String(), err)
		}
	}
}

// A plugin of the multicall binary that delegates to an IPAM plugin which
// is the same binary runs it in its own process: bridge's host-local on a
// CNI_PATH mounted noexec still gives an address, which an exec of it
// could not (EACCES). The noexec mount is a bind of the install folder in
// a mount namespace of the call's own, so the file is the same one.
func TestMulticallRunsItsIPAMInProcess(t *testing.T) {
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Fatal("unshare is needed (util-linux)")
	}
	dir := t.TempDir()
	if out, err := exec.Command(testutil.Multicall(t), "install", "--dir", dir).CombinedOutput(); err != nil {
		t.Fatalf("install: %v: %s", err, out)
	}
	noexec := t.TempDir()
	hostNS, _ := testutil.NewTestNS(t)
	contNS, _ := testutil.NewTestNS(t)
	data := t.TempDir()
	conf := fmt.Sprintf(`{"cniVersion":"1.1.0","name":"inproc","type":"bridge","bridge":"cni-inproc",
		"ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"10.77.7.0/24"}]]}}`, data)
	call := func(cniPath string, contNS *ns.NetNS) (string, error) {
		cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
			`mount --bind "$1" "$2" && mount -o remount,bind,noexec "$2" && CNI_PATH="$3" exec "$1/bridge"`,
			"sh", dir, noexec, cniPath)
		cmd.Env = append(os.Environ(), "CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_NETNS="+contNS.Path(), "CNI_IFNAME=eth0")
		cmd.Stdin = strings.NewReader(conf)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := hostNS.Do(cmd.Run) // the child starts in the stand-in host
		return out.String(), err
	}
	out, err := call(noexec, contNS)
	if err != nil || !strings.Contains(out, `"10.77.7.2/24"`) {
		t.Fatalf("bridge ADD with host-local on a noexec CNI_PATH: %v: %s", err, out)
	}
	// The check can fail: an IPAM plugin that is another binary on that
	// path is exec'd, and the mount refuses it.
	if err := os.Remove(filepath.Join(dir, "host-local")); err != nil {
		t.Fatal(err)
	}
	// A file in the folder (a link would leave it, to an exec mount).
	trueBin, err := os.ReadFile("/usr/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "host-local"), trueBin, 0o755); err != nil {
		t.Fatal(err)
	}
	other, _ := testutil.NewTestNS(t)
	if out, err := call(noexec, other); err == nil || !strings.Contains(out, "permission denied") {
		t.Errorf("a foreign host-local on a noexec CNI_PATH: %v: %s; want an exec refused", err, out)
	}
}
