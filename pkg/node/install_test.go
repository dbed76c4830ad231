package node

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/all"
	"github.com/cniforge/plugins/plugins/companion"
	"github.com/cniforge/plugins/plugins/light"
)

func runCLI(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(testutil.Multicall(t), args...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// installed checks dir holds cniforge and its companions, cniforge-light
// and cniforge-dhcp (the same bytes as the built binaries), and a link per
// plugin that runs that plugin: a light plugin's to cniforge-light, dhcp's
// to cniforge-dhcp, every other one's to cniforge; and no temp files.
func installed(t *testing.T, dir string) {
	t.Helper()
	installedLinks(t, dir, true)
}

// installedLinks is installed, where withCompanions says whether the
// companions were beside cniforge: without them the light plugins link to
// cniforge, and dhcp is not there.
func installedLinks(t *testing.T, dir string, withCompanions bool) {
	t.Helper()
	bins := []string{"cniforge"}
	type want struct{ name, target string }
	var links []want
	for _, p := range all.Plugins() {
		target := "cniforge"
		if _, ok := light.Lookup(p.Name); ok && withCompanions {
			target = light.Binary
		}
		links = append(links, want{p.Name, target})
	}
	if withCompanions {
		bins = append(bins, companion.Binaries()...)
		links = append(links, want{"dhcp", companion.DHCP})
	} else if _, err := os.Lstat(filepath.Join(dir, "dhcp")); err == nil {
		t.Errorf("%s/dhcp installed without %s", dir, companion.DHCP)
	}
	for _, b := range bins {
		want, err := os.ReadFile(filepath.Join(filepath.Dir(testutil.Multicall(t)), b))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, b))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s/%s is not the built binary (%v)", dir, b, err)
		}
	}
	for _, l := range links {
		if got, err := os.Readlink(filepath.Join(dir, l.name)); err != nil || got != l.target {
			t.Errorf("%s/%s links to %q (%v), want %q", dir, l.name, got, err, l.target)
		}
		cmd := exec.Command(filepath.Join(dir, l.name))
		cmd.Env = []string{}
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "CNI "+l.name+" plugin ") {
			t.Errorf("%s/%s: %v %q, want its about text", dir, l.name, err, out)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left behind %s", e.Name())
		}
	}
}

// installedFiles is how many names a full install writes: cniforge, its
// companions, and a link per plugin (cniforge's and dhcp).
func installedFiles() int {
	return 1 + len(companion.Binaries()) + len(all.Plugins()) + len(companion.Only(companion.DHCP))
}

func TestInstallFreshThenAgain(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "opt", "cni", "bin")
	out, rc := runCLI(t, "install", "--dir", dir)
	if rc != 0 {
		t.Fatalf("install: exit %d: %s", rc, out)
	}
	installed(t, dir)
	if n := strings.Count(out, ": new\n"); n != installedFiles() {
		t.Errorf("first install reported %d new files, want %d:\n%s", n, installedFiles(), out)
	}
	out, rc = runCLI(t, "install", "--dir", dir)
	if rc != 0 {
		t.Fatalf("second install: exit %d: %s", rc, out)
	}
	installed(t, dir)
	if n := strings.Count(out, ": replaced cniforge's\n"); n != installedFiles() {
		t.Errorf("second install reported %d replaced files, want all:\n%s", n, out)
	}
}

// A separate cniforge binary (the old README's install) is cniforge's and
// replaced; an upstream or user file is refused, and then nothing at all
// changes, until --force.
func TestInstallRefusesForeignFiles(t *testing.T) {
	dir := t.TempDir()
	sep, err := os.ReadFile(filepath.Join(filepath.Dir(testutil.Multicall(t)), "bridge"))
	if err != nil {
		t.Fatal(err)
	}
	foreign := []byte("#!/bin/sh\necho upstream host-local\n")
	must(t, os.WriteFile(filepath.Join(dir, "bridge"), sep, 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "host-local"), foreign, 0o755))

	out, rc := runCLI(t, "install", "--dir", dir)
	if rc != 1 || !strings.Contains(out, `["host-local"] not cniforge's; nothing installed`) {
		t.Fatalf("install over a foreign host-local: exit %d: %s", rc, out)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("a refused install wrote files: %v", entries)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "host-local")); !bytes.Equal(b, foreign) {
		t.Error("a refused install changed host-local")
	}

	out, rc = runCLI(t, "install", "--force", "--dir", dir)
	if rc != 0 {
		t.Fatalf("install --force: exit %d: %s", rc, out)
	}
	installed(t, dir)
	for _, line := range []string{
		filepath.Join(dir, "bridge") + " -> cniforge: replaced cniforge's",
		filepath.Join(dir, "host-local") + " -> cniforge: replaced a file not cniforge's (--force)",
		filepath.Join(dir, "cniforge") + ": new",
		filepath.Join(dir, light.Binary) + ": new",
		filepath.Join(dir, "loopback") + " -> " + light.Binary + ": new",
		filepath.Join(dir, companion.DHCP) + ": new",
		filepath.Join(dir, "dhcp") + " -> " + companion.DHCP + ": new",
	} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("install --force did not report %q:\n%s", line, out)
		}
	}
}

func TestInstallBadArguments(t *testing.T) {
	for _, args := range [][]string{{"install", "--nope"}, {"install", "extra"}} {
		if out, rc := runCLI(t, args...); rc != 2 {
			t.Errorf("%v: exit %d, want 2: %s", args, rc, out)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A FIFO named like a plugin must not hang install, nor a link to
// /dev/zero make it read without end: neither is a regular file, so
// neither is cniforge's. (The run is bounded in time and memory so that
// a regression fails instead of taking the machine.)
func TestInstallReadsOnlyRegularFiles(t *testing.T) {
	dir := t.TempDir()
	must(t, unix.Mkfifo(filepath.Join(dir, "bridge"), 0o644))
	must(t, os.Symlink("/dev/zero", filepath.Join(dir, "loopback")))
	bounded := func(args ...string) (string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		argv := append([]string{"--as=2147483648", testutil.Multicall(t)}, args...)
		out, err := exec.CommandContext(ctx, "prlimit", argv...).CombinedOutput()
		if ctx.Err() != nil {
			t.Fatalf("install %v hung: %s", args, out)
		}
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	out, rc := bounded("install", "--dir", dir)
	if rc != 1 || !strings.Contains(out, `["bridge" "loopback"] not cniforge's; nothing installed`) {
		t.Fatalf("install over a FIFO and a link to /dev/zero: exit %d: %s", rc, out)
	}
	out, rc = bounded("install", "--force", "--dir", dir)
	if rc != 0 {
		t.Fatalf("install --force: exit %d: %s", rc, out)
	}
	installed(t, dir)
}

// lonely copies the built cniforge into a folder of its own, with the
// given companions beside it (file name to bytes), and returns the copy's
// path.
func lonely(t *testing.T, companions map[string][]byte) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "src")
	must(t, os.Mkdir(src, 0o755))
	b, err := os.ReadFile(testutil.Multicall(t))
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(filepath.Join(src, "cniforge"), b, 0o755))
	for name, b := range companions {
		must(t, os.WriteFile(filepath.Join(src, name), b, 0o755))
	}
	return filepath.Join(src, "cniforge")
}

func runBin(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// A cniforge with no companion beside it (built or copied alone) still
// installs: every plugin it holds linked to it, dhcp (which it does not
// hold) left out, and it says so for each. Then, from beside the
// companions, the light plugins' links move to cniforge-light and dhcp
// links to cniforge-dhcp.
func TestInstallWithoutCompanions(t *testing.T) {
	dir := t.TempDir()
	out, rc := runBin(t, lonely(t, nil), "install", "--dir", dir)
	if rc != 0 || !strings.Contains(out, "no "+light.Binary+" beside ") || !strings.Contains(out, ": dhcp not installed (cniforge does not hold it)\n") {
		t.Fatalf("install without the companions: exit %d: %s", rc, out)
	}
	installedLinks(t, dir, false)
	for _, b := range companion.Binaries() {
		if _, err := os.Lstat(filepath.Join(dir, b)); err == nil {
			t.Errorf("install without %s wrote one", b)
		}
	}
	out, rc = runCLI(t, "install", "--dir", dir)
	if rc != 0 || !strings.Contains(out, filepath.Join(dir, "vrf")+" -> "+light.Binary+": replaced cniforge's\n") {
		t.Fatalf("install with %s: exit %d: %s", light.Binary, rc, out)
	}
	installed(t, dir)
}

// A companion beside cniforge that is not cniforge's, or of another
// version, or holding a plugin neither cniforge nor it should, stops the
// install before anything is written.
func TestInstallRefusesStrangeCompanions(t *testing.T) {
	for name, tc := range map[string]struct {
		bin, script, want string
	}{
		"foreign": {light.Binary, "#!/bin/sh\necho cniforge-light\n", "is not cniforge's; nothing installed"},
		"stale": {light.Binary, "#!/bin/sh\n# CNI loopback plugin v0 (cniforge): CNI spec\n" +
			"printf 'cniforge-light v0.0.1\\nplugins: loopback\\n'\n", `is "cniforge-light v0.0.1", not`},
		"more": {light.Binary, "#!/bin/sh\n# (cniforge): \nprintf '%s\\nplugins: loopback nope\\n' \"cniforge-light $V\"\n",
			`holds "nope", which cniforge does not; nothing installed`},
		"light holding dhcp": {light.Binary, "#!/bin/sh\n# (cniforge): \nprintf '%s\\nplugins: loopback dhcp\\n' \"cniforge-light $V\"\n",
			`holds "dhcp", which cniforge does not; nothing installed`},
		"stale dhcp": {companion.DHCP, "#!/bin/sh\n# CNI dhcp plugin v0 (cniforge): CNI spec\n" +
			"printf 'cniforge-dhcp v0.0.1\\nplugins: dhcp\\n'\n", `is "cniforge-dhcp v0.0.1", not`},
	} {
		t.Run(name, func(t *testing.T) {
			version, _ := runCLI(t, "version")
			v := strings.TrimPrefix(strings.SplitN(version, "\n", 2)[0], "cniforge ")
			script := strings.Replace(tc.script, "$V", v, 1)
			dir := t.TempDir()
			out, rc := runBin(t, lonely(t, map[string][]byte{tc.bin: []byte(script)}), "install", "--dir", dir)
			if rc != 1 || !strings.Contains(out, tc.want) {
				t.Fatalf("exit %d, want 1 and %q: %s", rc, tc.want, out)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("a refused install wrote files: %v", entries)
			}
		})
	}
}

// Installed, bridge (in cniforge) delegating to static (linked to
// cniforge-light) is no longer one binary: the delegation execs the
// other one, and ADD, CHECK and DEL work through it. Then tuning (in
// cniforge-light) chained after bridge.
func TestInstalledDelegationAcrossBinaries(t *testing.T) {
	n := newNode(t)
	if l, err := os.Readlink(filepath.Join(n.bin, "static")); err != nil || l != light.Binary {
		t.Fatalf("static links to %q (%v), want %s: the test needs it in the other binary", l, err, light.Binary)
	}
	// tuning's dataDir in the test's own folder: its default is the
	// host's /run/cni/tuning.
	n.setConf(fmt.Sprintf(`{"cniVersion":"1.1.0","name":"nodenet","plugins":[
		{"type":"bridge","bridge":"cnode1","ipam":{"type":"static","addresses":[{"address":"10.124.0.7/24"}]}},
		{"type":"tuning","dataDir":%q,"sysctl":{"net.ipv4.conf.eth0.accept_local":"1"}}]}`, filepath.Join(t.TempDir(), "tuning")))
	contNS, _ := testutil.NewTestNS(t)
	got, err := n.tryAdd(n.cache, "ctr-across", "eth0", contNS)
	if err != nil || got != "10.124.0.7" {
		t.Fatalf("ADD: %q, %v; want 10.124.0.7", got, err)
	}
	cni := libcni.NewCNIConfigWithCacheDir([]string{n.bin}, n.cache, nil)
	rt := &libcni.RuntimeConf{ContainerID: "ctr-across", NetNS: contNS.Path(), IfName: "eth0"}
	must(t, n.hostNS.Do(func() error { return cni.CheckNetworkList(context.Background(), n.list, rt) }))
	must(t, n.del("ctr-across", contNS))
}

// An install before dhcp moved to cniforge-dhcp linked dhcp to cniforge,
// which now answers it with code 7 ("dhcp is in cniforge-dhcp"). An
// install without cniforge-dhcp removes such a link, and says so; a binary
// of ours that still runs dhcp (a separate dhcp) stays for live pods'
// DELs, and install says so. With cniforge-dhcp beside it, dhcp links to
// that again.
func TestInstallRemovesAStaleDHCP(t *testing.T) {
	sep, err := os.ReadFile(filepath.Join(filepath.Dir(testutil.Multicall(t)), "dhcp"))
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		leave func(dhcp string) error
		says  string
		kept  bool
	}{
		"link to cniforge":     {func(dhcp string) error { return os.Symlink("cniforge", dhcp) }, ": removed cniforge's", false},
		"binary of cniforge's": {func(dhcp string) error { return os.WriteFile(dhcp, sep, 0o755) }, ": left as it is, cniforge's from an earlier install", true},
	} {
		t.Run(name, func(t *testing.T) {
			dir, self := t.TempDir(), lonely(t, nil)
			if out, rc := runBin(t, self, "install", "--dir", dir); rc != 0 {
				t.Fatalf("install: exit %d: %s", rc, out)
			}
			dhcp := filepath.Join(dir, "dhcp")
			must(t, c.leave(dhcp))
			out, rc := runBin(t, self, "install", "--dir", dir)
			if rc != 0 || !strings.Contains(out, dhcp+c.says+" (dhcp is in "+companion.DHCP+", not installed)\n") {
				t.Fatalf("install over a stale dhcp without %s: exit %d: %s", companion.DHCP, rc, out)
			}
			if _, err := os.Lstat(dhcp); (err == nil) != c.kept {
				t.Fatalf("install over a stale dhcp without %s: dhcp kept %v, want %v (%v)", companion.DHCP, err == nil, c.kept, err)
			}
			if !c.kept {
				installedLinks(t, dir, false)
			}
			was := "new"
			if c.kept {
				was = "replaced cniforge's"
			}
			out, rc = runCLI(t, "install", "--dir", dir)
			if rc != 0 || !strings.Contains(out, dhcp+" -> "+companion.DHCP+": "+was+"\n") {
				t.Fatalf("install with %s: exit %d: %s", companion.DHCP, rc, out)
			}
			installed(t, dir)
		})
	}
}

// A dhcp that is not cniforge's (upstream's, a user's) stays where it is,
// even with --force: an install without cniforge-dhcp puts nothing in its
// place. Install says it left it.
func TestInstallLeavesAForeignDHCP(t *testing.T) {
	dir, self := t.TempDir(), lonely(t, nil)
	dhcp := filepath.Join(dir, "dhcp")
	foreign := []byte("#!/bin/sh\necho upstream dhcp\n")
	must(t, os.WriteFile(dhcp, foreign, 0o755))
	for _, args := range [][]string{{"install", "--dir", dir}, {"install", "--force", "--dir", dir}} {
		out, rc := runBin(t, self, args...)
		if rc != 0 || !strings.Contains(out, dhcp+": left as it is, not cniforge's (dhcp is in "+companion.DHCP+", not installed)\n") {
			t.Fatalf("%v over a foreign dhcp: exit %d: %s", args, rc, out)
		}
		if b, err := os.ReadFile(dhcp); err != nil || !bytes.Equal(b, foreign) {
			t.Fatalf("%v changed the foreign dhcp: %q, %v", args, b, err)
		}
	}
}
