package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

// node is a stand-in node: a host netns, a plugin dir holding a cniforge
// install, a conf dir, libcni's cache, host-local's data dir.
type node struct {
	t                          *testing.T
	hostNS                     *ns.NetNS
	bin, conf, cache, ipamData string
	multus                     string // Multus's cniDir (absent unless a test makes it)
	list                       *libcni.NetworkConfigList
}

func newNode(t *testing.T) *node { return newNodeWith(t, "") }

// newNodeWith: extra is JSON members put at the head of nodenet's conflist
// (`"disableGC":true,`).
func newNodeWith(t *testing.T, extra string) *node {
	if os.Getuid() != 0 {
		t.Fatal("needs root (network namespaces)")
	}
	dir := t.TempDir()
	n := &node{t: t, bin: filepath.Join(dir, "bin"), conf: filepath.Join(dir, "net.d"),
		cache: filepath.Join(dir, "cache"), ipamData: filepath.Join(dir, "ipam"), multus: filepath.Join(dir, "multus")}
	n.hostNS, _ = testutil.NewTestNS(t)
	if out, rc := runCLI(t, "install", "--dir", n.bin); rc != 0 {
		t.Fatalf("install: %s", out)
	}
	must(t, os.MkdirAll(n.conf, 0o755))
	conf := fmt.Sprintf(`{%s"cniVersion":"1.1.0","name":"nodenet","plugins":[{"type":"bridge","bridge":"cnode0",
		"isGateway":true,"ipMasq":true,"ipMasqBackend":"nftables",
		"ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"10.123.0.0/24"}]]}}]}`, extra, n.ipamData)
	n.setConf(conf)
	// A second network, older than GC: listed, never GC'd.
	must(t, os.WriteFile(filepath.Join(n.conf, "20-old.conf"), []byte(`{"cniVersion":"0.4.0","name":"oldnet","type":"loopback"}`), 0o644))
	return n
}

// add attaches container id in contNS through libcni, as a runtime would.
func (n *node) add(id string, contNS *ns.NetNS) string {
	n.t.Helper()
	return n.addAs(n.cache, id, "eth0", contNS)
}

// liveAndGone attaches ctr-live and ctr-gone, each in a namespace of its
// own, and returns their namespaces and what removes ctr-gone's: a
// container that goes away without a DEL.
func (n *node) liveAndGone() (live, gone *ns.NetNS, rmGone func() error) {
	n.t.Helper()
	l, g := n.attach("ctr-live"), n.attach("ctr-gone")
	return l.ns, g.ns, g.rm
}

// ctr is a container attached through libcni on a netns of its own.
type ctr struct {
	ns *ns.NetNS
	ip string
	rm func() error // removes the netns, behind the runtime's back
}

// attach attaches id's eth0 (n's cache) on a fresh netns.
func (n *node) attach(id string) ctr {
	n.t.Helper()
	return n.attachAs(n.cache, id, "eth0")
}

// attachAs is attach through libcni with cache as its cache dir (see addAs).
func (n *node) attachAs(cache, id, ifName string) ctr {
	n.t.Helper()
	contNS, rm := testutil.NewTestNS(n.t)
	return ctr{ns: contNS, ip: n.addAs(cache, id, ifName, contNS), rm: rm}
}

// liveAndLost attaches ctr-live and ctr-lost, removes ctr-lost's netns
// behind the runtime's back, and waits until the kernel has destroyed it;
// it returns both containers' addresses.
func (n *node) liveAndLost() (ipLive, ipLost string) {
	n.t.Helper()
	live, lost := n.attach("ctr-live"), n.attach("ctr-lost")
	must(n.t, lost.rm())
	n.waitLinks(3) // lo, cnode0, the live container's veth
	return live.ip, lost.ip
}

// replaceInConf replaces old with new, once, in nodenet's conflist in the
// conf dir: an admin's edit after the ADDs (n.list keeps what they used).
func (n *node) replaceInConf(old, new string) {
	n.t.Helper()
	path := filepath.Join(n.conf, "10-nodenet.conflist")
	b, err := os.ReadFile(path)
	must(n.t, err)
	must(n.t, os.WriteFile(path, bytes.Replace(b, []byte(old), []byte(new), 1), 0o644))
}

// addAs attaches through libcni with cache as its cache dir: a runtime's,
// or Multus's (it runs libcni on each delegate with its cniDir).
func (n *node) addAs(cache, id, ifName string, contNS *ns.NetNS) string {
	n.t.Helper()
	ip, err := n.tryAdd(cache, id, ifName, contNS)
	must(n.t, err)
	return ip
}

// tryAdd is addAs for any goroutine: it returns its error.
func (n *node) tryAdd(cache, id, ifName string, contNS *ns.NetNS) (string, error) {
	cni := libcni.NewCNIConfigWithCacheDir([]string{n.bin}, cache, nil)
	var res *current.Result
	err := n.hostNS.Do(func() error {
		r, err := cni.AddNetworkList(context.Background(), n.list, &libcni.RuntimeConf{
			ContainerID: id, NetNS: contNS.Path(), IfName: ifName})
		if err != nil {
			return err
		}
		res, err = current.NewResultFromResult(r)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("ADD %s: %w", id, err)
	}
	return res.IPs[0].Address.IP.String(), nil
}

// del detaches container id through libcni, as a runtime would.
func (n *node) del(id string, contNS *ns.NetNS) error {
	cni := libcni.NewCNIConfigWithCacheDir([]string{n.bin}, n.cache, nil)
	err := n.hostNS.Do(func() error {
		return cni.DelNetworkList(context.Background(), n.list, &libcni.RuntimeConf{
			ContainerID: id, NetNS: contNS.Path(), IfName: "eth0"})
	})
	if err != nil {
		return fmt.Errorf("DEL %s: %w", id, err)
	}
	return nil
}

// cli runs the built cniforge with args (a verb, then its flags) inside
// the node's host netns, with the node's dirs; a --cache-dir in args wins.
func (n *node) cli(args ...string) (string, int) {
	n.t.Helper()
	return n.run(append([]string{testutil.Multicall(n.t)}, n.cliArgs(args...)...)...)
}

func (n *node) cliArgs(args ...string) []string {
	return append([]string{args[0], "--cache-dir", n.cache, "--conf-dir", n.conf, "--bin-dir", n.bin, "--multus-dir", n.multus}, args[1:]...)
}

// run runs argv inside the node's host netns.
func (n *node) run(argv ...string) (string, int) {
	n.t.Helper()
	var out string
	var rc int
	must(n.t, n.hostNS.Do(func() error {
		cmd := exec.Command(argv[0], argv[1:]...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		out = stdout.String() + stderr.String()
		if ee, ok := err.(*exec.ExitError); ok {
			rc = ee.ExitCode()
			return nil
		}
		return err
	}))
	return out, rc
}

// snapshot is what gc may change: cache and reservation files, the host
// netns's links and its nftables ruleset.
func (n *node) snapshot() string {
	n.t.Helper()
	var b strings.Builder
	for _, d := range []string{n.cache, n.ipamData} {
		_ = filepath.Walk(d, func(p string, fi os.FileInfo, err error) error {
			if err == nil && !fi.IsDir() {
				fmt.Fprintln(&b, p)
			}
			return nil
		})
	}
	fmt.Fprintln(&b, "links:", n.links())
	fmt.Fprintln(&b, n.nft())
	return b.String()
}

// links are the host netns's link names, sorted, read over netlink: `ip`'s
// text carries error lines for peers in namespaces being made or removed
// by other processes on a busy node.
func (n *node) links() []string {
	n.t.Helper()
	h, err := n.hostNS.Handle()
	must(n.t, err)
	defer h.Close()
	links, err := ip.LinkList(h)
	must(n.t, err)
	var names []string
	for _, l := range links {
		names = append(names, l.Attrs().Name)
	}
	sort.Strings(names)
	return names
}

// waitLinks waits (up to a deadline) until the host netns has want links.
func (n *node) waitLinks(want int) {
	n.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for len(n.links()) != want {
		if time.Now().After(deadline) {
			n.t.Fatalf("host links %v, want %d", n.links(), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (n *node) nft() string {
	var out []byte
	must(n.t, n.hostNS.Do(func() error {
		var err error
		out, err = exec.Command("nft", "list", "ruleset").CombinedOutput()
		return err
	}))
	return string(out)
}

func (n *node) ls() nodeState {
	n.t.Helper()
	out, rc := n.cli("ls", "--json")
	if rc != 0 {
		n.t.Fatalf("ls --json: exit %d: %s", rc, out)
	}
	var st nodeState
	must(n.t, json.Unmarshal([]byte(out), &st))
	return st
}

// A node whose runtime never sends GC: two containers' netns were deleted
// without a DEL, and a third's cache entry was lost with its netns. ls shows
// it; gc's dry run changes nothing; gc --apply reclaims exactly the leaked
// reservations, rules and links and keeps the live container's.
func TestNodeToolReclaimsLeaks(t *testing.T) {
	n := newNode(t)
	live, gone1, gone2, lost := n.attach("ctr-live"), n.attach("ctr-gone1"), n.attach("ctr-gone2"), n.attach("ctr-lost")
	ipLive, ipGone1, ipGone2, ipLost := live.ip, gone1.ip, gone2.ip, lost.ip
	for _, id := range []string{"ctr-live", "ctr-gone1", "ctr-gone2", "ctr-lost"} {
		if !strings.Contains(n.nft(), id) {
			t.Fatalf("no masquerade rule names %s; the test cannot see rules:\n%s", id, n.nft())
		}
	}
	// Behind the runtime's back.
	must(t, gone1.rm())
	must(t, gone2.rm())
	must(t, lost.rm())
	must(t, os.Remove(filepath.Join(n.cache, "results", "nodenet-ctr-lost-eth0")))
	n.age(ipLost) // older than --min-age: no ADD can still be making it
	// The kernel destroys a removed namespace (and the host ends of its
	// veths) asynchronously; the snapshots below need it finished.
	n.waitLinks(3) // lo, cnode0, the live container's veth

	st := n.ls()
	got := map[string]string{}
	for _, a := range st.Attachments {
		got[a.ContainerID] = a.NetnsState + " " + strings.Join(a.IPs, ",")
	}
	want := map[string]string{
		"ctr-live":  "live " + ipLive + "/24",
		"ctr-gone1": "gone " + ipGone1 + "/24",
		"ctr-gone2": "gone " + ipGone2 + "/24",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ls attachments: %v, want %v", got, want)
	}
	if len(st.Orphans) != 1 || st.Orphans[0].IP != ipLost || st.Orphans[0].ContainerID != "ctr-lost" {
		t.Errorf("ls orphans: %+v, want %s of ctr-lost", st.Orphans, ipLost)
	}
	if len(st.Networks) != 2 || st.Networks[0].Name != "nodenet" || st.Networks[0].Used != 4 || st.Networks[0].Free != "249" {
		t.Errorf("ls networks: %+v, want nodenet 4 used, 249 free (and oldnet)", st.Networks)
	}
	text, rc := n.cli("ls")
	t.Logf("cniforge ls:\n%s", text)
	for _, line := range []string{"nodenet  ctr-gone1  eth0", "nodenet  " + ipLost + "  ctr-lost", "nodenet  1.1.0       host-local  4     249"} {
		if rc != 0 || !strings.Contains(text, line) {
			t.Errorf("ls (exit %d) lacks %q:\n%s", rc, line, text)
		}
	}

	before := n.snapshot()
	out, rc := n.cli("gc")
	t.Logf("cniforge gc:\n%s", out)
	if rc != 0 {
		t.Fatalf("gc dry run: exit %d: %s", rc, out)
	}
	for _, line := range []string{
		"nodenet: would DEL ctr-gone1 eth0 (netns " + gone1.ns.Path() + " is gone)",
		"nodenet: would DEL ctr-gone2 eth0",
		"nodenet: would DEL ctr-lost eth0 (releases unowned reservation(s) " + ipLost + ", 10m",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("gc dry run lacks %q:\n%s", line, out)
		}
	}
	if after := n.snapshot(); after != before {
		t.Errorf("gc dry run changed the node:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	out, rc = n.cli("gc", "--apply")
	if rc != 0 {
		t.Fatalf("gc --apply: exit %d: %s", rc, out)
	}
	t.Logf("cniforge gc --apply:\n%s", out)
	if !strings.Contains(out, "nodenet: DEL ctr-lost eth0 (releases unowned reservation(s) "+ipLost) || !strings.Contains(out, "nodenet: DEL ctr-gone2 eth0") {
		t.Errorf("gc --apply printed:\n%s", out)
	}
	st = n.ls()
	if len(st.Attachments) != 1 || st.Attachments[0].ContainerID != "ctr-live" || len(st.Orphans) != 0 || st.Networks[0].Used != 1 {
		t.Errorf("after gc --apply: %+v", st)
	}
	if ents, _ := os.ReadDir(filepath.Join(n.ipamData, "nodenet")); !hasOnlyAddr(ents, ipLive) {
		t.Errorf("reservations after gc: %v, want only %s", ents, ipLive)
	}
	rules := n.nft()
	if !strings.Contains(rules, "ctr-live") {
		t.Errorf("gc removed the live container's rule:\n%s", rules)
	}
	for _, id := range []string{"ctr-gone1", "ctr-gone2", "ctr-lost"} {
		if strings.Contains(rules, id) {
			t.Errorf("gc left %s's rule:\n%s", id, rules)
		}
	}
	links := n.links()
	if len(links) != 3 { // lo, cnode0, the live veth
		t.Errorf("host links after gc: %v, want lo, cnode0 and the live container's veth", links)
	}
	// And again: nothing left to do.
	out, rc = n.cli("gc", "--apply")
	if rc != 0 || strings.Contains(out, "DEL") {
		t.Errorf("second gc --apply: exit %d:\n%s", rc, out)
	}
}

// age makes the reservation file of ip look 10 minutes old.
func (n *node) age(ip string) {
	n.t.Helper()
	old := time.Now().Add(-10 * time.Minute)
	must(n.t, os.Chtimes(filepath.Join(n.ipamData, "nodenet", ip), old, old))
}

func TestGCUnknownNetwork(t *testing.T) {
	n := newNode(t)
	if out, rc := n.cli("gc", "--network", "nope"); rc != 1 || !strings.Contains(out, `no network nope`) {
		t.Errorf("gc --network nope: exit %d: %s", rc, out)
	}
}

// hasOnlyAddr: among the files named by an address, only want.
func hasOnlyAddr(ents []os.DirEntry, want string) bool {
	var addrs []string
	for _, e := range ents {
		if strings.Count(e.Name(), ".") == 3 && !strings.Contains(e.Name(), "_") && !strings.HasPrefix(e.Name(), "last") {
			addrs = append(addrs, e.Name())
		}
	}
	return len(addrs) == 1 && addrs[0] == want
}

// containerd 1.6 and 1.7 (libcni before 1.2) write no netns into libcni's
// cache entry; the cached result's interface names it as "sandbox". gc
// finds it there: a container whose netns file went away is DELed, a live
// one is kept.
func TestGCNetnsFromCachedResult(t *testing.T) {
	n := newNode(t)
	live, gone, rm := n.liveAndGone()
	for _, id := range []string{"ctr-live", "ctr-gone"} {
		path := filepath.Join(n.cache, "results", "nodenet-"+id+"-eth0")
		b, err := os.ReadFile(path)
		must(t, err)
		var entry map[string]any
		must(t, json.Unmarshal(b, &entry))
		if entry["netns"] == nil {
			t.Fatalf("libcni's cache entry of %s has no netns to remove: %s", id, b)
		}
		delete(entry, "netns") // as libcni 1.1 wrote it
		b, err = json.Marshal(entry)
		must(t, err)
		must(t, os.WriteFile(path, b, 0o600))
	}
	must(t, rm())
	n.waitLinks(3) // lo, cnode0, the live container's veth

	got := map[string]string{}
	for _, a := range n.ls().Attachments {
		got[a.ContainerID] = a.NetnsState + " " + a.Netns
	}
	want := map[string]string{"ctr-live": "live " + live.Path(), "ctr-gone": "gone " + gone.Path()}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ls attachments: %v, want %v", got, want)
	}
	out, rc := n.cli("gc", "--apply")
	t.Logf("cniforge gc --apply:\n%s", out)
	if rc != 0 || !strings.Contains(out, "nodenet: DEL ctr-gone eth0 (netns "+gone.Path()+" is gone)") {
		t.Fatalf("gc --apply: exit %d:\n%s", rc, out)
	}
	st := n.ls()
	if len(st.Attachments) != 1 || st.Attachments[0].ContainerID != "ctr-live" || st.Networks[0].Used != 1 {
		t.Errorf("after gc --apply: %+v", st)
	}
	if rules := n.nft(); strings.Contains(rules, "ctr-gone") || !strings.Contains(rules, "ctr-live") {
		t.Errorf("rules after gc --apply (ctr-gone's must be gone, ctr-live's kept):\n%s", rules)
	}
}

// setConf writes conf as n's network (10-nodenet.conflist in the conf
// dir) and loads it as n.list.
func (n *node) setConf(conf string) {
	n.t.Helper()
	path := filepath.Join(n.conf, "10-nodenet.conflist")
	must(n.t, os.WriteFile(path, []byte(conf), 0o644))
	var err error
	n.list, err = libcni.ConfListFromFile(path)
	must(n.t, err)
}
