package node

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cniforge/plugins/pkg/filelock"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

// A mistyped --cache-dir would make every reservation look leaked.
func TestGCRefusesAnEmptyCache(t *testing.T) {
	n := newNode(t)
	ipLive, ipLost := n.liveAndLost()
	n.age(ipLive)
	n.age(ipLost)
	noResults := t.TempDir()
	emptyResults := t.TempDir()
	must(t, os.Mkdir(filepath.Join(emptyResults, "results"), 0o755))
	// A cache with an attachment of another network only.
	otherNet := t.TempDir()
	must(t, os.Mkdir(filepath.Join(otherNet, "results"), 0o755))
	must(t, os.WriteFile(filepath.Join(otherNet, "results", "othernet-c1-eth0"),
		[]byte(`{"kind":"cniCacheV1","containerId":"c1","ifName":"eth0","networkName":"othernet","netns":"/run/netns/x"}`), 0o600))

	before := n.snapshot()
	for _, c := range []struct{ cache, want string }{
		{noResults, noResults + " has no results/ folder"},
		{emptyResults, "holds no attachment while 2 reservation(s) exist"},
	} {
		out, rc := n.cli("gc", "--apply", "--cache-dir", c.cache)
		if rc != 1 || !strings.Contains(out, c.want) || strings.Contains(out, "DEL") {
			t.Errorf("gc --apply --cache-dir %s: exit %d, want 1 and %q:\n%s", c.cache, rc, c.want, out)
		}
	}
	out, rc := n.cli("gc", "--apply", "--cache-dir", otherNet)
	if rc != 0 || !strings.Contains(out, "nodenet: keeps 2 unowned reservation(s): no cached attachment owns any") || strings.Contains(out, "DEL") {
		t.Errorf("gc --apply with another network's cache: exit %d:\n%s", rc, out)
	}
	if after := n.snapshot(); after != before {
		t.Errorf("a refused gc changed the node:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// Said explicitly: it goes on, and still keeps the live container,
	// whose veth shows its netns lives.
	out, rc = n.cli("gc", "--apply", "--cache-dir", emptyResults, "--allow-empty-cache")
	t.Logf("gc --apply --allow-empty-cache:\n%s", out)
	if rc != 0 || !strings.Contains(out, "nodenet: DEL ctr-lost eth0 (releases unowned reservation(s) "+ipLost) ||
		!strings.Contains(out, "nodenet: keeps ctr-live eth0 (reservation(s) "+ipLive+": its veth is still in this namespace") {
		t.Errorf("gc --apply --allow-empty-cache: exit %d:\n%s", rc, out)
	}
	if ents, _ := os.ReadDir(filepath.Join(n.ipamData, "nodenet")); !hasOnlyAddr(ents, ipLive) {
		t.Errorf("reservations after gc: %v, want only %s", ents, ipLive)
	}
}

// disableGC: other runtimes share the network; gc leaves it alone.
func TestGCHonoursDisableGC(t *testing.T) {
	n := newNodeWith(t, `"disableGC":true,`)
	_, _, rmGone := n.liveAndGone()
	lost, rmLost := testutil.NewTestNS(t)
	ipLost := n.add("ctr-lost", lost)
	must(t, rmGone())
	must(t, rmLost())
	must(t, os.Remove(filepath.Join(n.cache, "results", "nodenet-ctr-lost-eth0")))
	n.age(ipLost)
	n.waitLinks(3)
	n.gcApplyKeeps("a disableGC network", "DEL",
		"nodenet: keeps ctr-gone eth0 (netns gone, but the network has disableGC)",
		"nodenet: keeps 1 unowned reservation(s) (disableGC")
}

// disableGC set on the network today, after the attachment was made with
// a config without it: the conf dir's network says other runtimes share
// it, so gc DELs none of its cached attachments either.
func TestGCHonoursTheNetworksDisableGCForCachedAttachments(t *testing.T) {
	n := newNode(t)
	_, _, rmGone := n.liveAndGone()
	n.replaceInConf(`{"cniVersion"`, `{"disableGC":true,"cniVersion"`)
	cached, err := os.ReadFile(filepath.Join(n.cache, "results", "nodenet-ctr-gone-eth0"))
	must(t, err)
	var e cacheEntry
	must(t, json.Unmarshal(cached, &e))
	if bytes.Contains(e.Config, []byte("disableGC")) {
		t.Fatalf("the cached config already has disableGC: the test cannot tell the network's from it: %s", e.Config)
	}
	must(t, rmGone())
	n.waitLinks(3)
	n.gcApplyKeeps("disableGC in the conf dir only", "DEL",
		"nodenet: keeps ctr-gone eth0 (netns gone, but the network has disableGC)")
}

// A container with two attachments on one network (eth0 and net1) lost
// net1's cache entry and net1's veth: net1's reservation looks unowned,
// but a DEL by the container's ID runs through plugins that key state on
// the ID alone, so gc keeps it while eth0 is cached.
func TestGCKeepsAnUnownedReservationOfACachedContainer(t *testing.T) {
	n := newNode(t)
	pod, _ := testutil.NewTestNS(t)
	n.add("ctr-x", pod)
	ip1 := n.addAs(n.cache, "ctr-x", "net1", pod)
	must(t, os.Remove(filepath.Join(n.cache, "results", "nodenet-ctr-x-net1")))
	// Without its veth, nothing else shows gc that net1 still lives.
	h, err := n.hostNS.Handle()
	must(t, err)
	links, err := ip.LinkList(h)
	must(t, err)
	for _, l := range links {
		if l.Attrs().Alias == "cni:ctr-x:net1" {
			must(t, h.LinkDel(l))
		}
	}
	h.Close()
	n.waitLinks(3) // lo, cnode0, eth0's veth
	n.age(ip1)
	n.gcApplyKeeps("an unowned reservation of a cached container", ": DEL ",
		"nodenet: keeps ctr-x net1 (reservation(s) "+ip1+": the container has other cached attachments on this network")
}

// A round that fails (here: --network names nothing) is said, with the
// time, in every --every loop; the loop goes on until SIGTERM.
func TestGCLoopSaysARoundFailed(t *testing.T) {
	n := newNode(t)
	out, cmd, exited := n.startGCLoop("--network", "nope", "--every", "10ms")
	want := regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ round failed: no network nope in `)
	deadline := time.Now().Add(60 * time.Second)
	for !want.MatchString(out.String()) {
		select {
		case err := <-exited:
			t.Fatalf("gc --every ended (%v) before saying its round failed:\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("gc --every never said its round failed:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	n.stopGCLoop(out, cmd, exited)
	t.Logf("gc --every with a failing round:\n%s", out.String())
}

// The conf dir's file changed since the ADD (here: to a plugin that does
// not exist); DEL runs what the ADD ran, which libcni cached.
func TestGCDeletesWithTheCachedConfig(t *testing.T) {
	n := newNode(t)
	_, gone, rmGone := n.liveAndGone()
	n.replaceInConf(`"type":"bridge"`, `"type":"no-such-plugin"`)
	must(t, rmGone())
	out, rc := n.cli("gc", "--apply")
	t.Logf("gc --apply:\n%s", out)
	if rc != 0 || !strings.Contains(out, "nodenet: DEL ctr-gone eth0 (netns "+gone.Path()+" is gone)\n") {
		t.Errorf("gc --apply: exit %d:\n%s", rc, out)
	}
	if _, err := os.Stat(filepath.Join(n.cache, "results", "nodenet-ctr-gone-eth0")); !os.IsNotExist(err) {
		t.Errorf("ctr-gone's cache entry is still there (%v)", err)
	}
	if strings.Contains(n.nft(), "ctr-gone") {
		t.Errorf("ctr-gone's rule is still there:\n%s", n.nft())
	}
}

// A reservation without a cached attachment may be an ADD still running:
// kept while younger than --min-age, and while the network's lock is held.
func TestGCKeepsReservationsAnADDMayHold(t *testing.T) {
	n := newNode(t)
	ipLive, ipLost := n.liveAndLost()
	must(t, os.Remove(filepath.Join(n.cache, "results", "nodenet-ctr-lost-eth0")))
	reserved := func() bool {
		_, err := os.Stat(filepath.Join(n.ipamData, "nodenet", ipLost))
		return err == nil
	}

	out, rc := n.cli("gc", "--apply")
	t.Logf("gc --apply, a fresh unowned reservation:\n%s", out)
	if rc != 0 || strings.Contains(out, "DEL") || !strings.Contains(out, "nodenet: keeps ctr-lost eth0 (reservation(s) "+ipLost+" ") ||
		!strings.Contains(out, "under --min-age 5m0s") || !reserved() {
		t.Errorf("gc --apply with a fresh unowned reservation: exit %d:\n%s", rc, out)
	}
	n.age(ipLost)
	out, rc = n.cli("gc", "--apply", "--min-age", "1h")
	if rc != 0 || strings.Contains(out, "DEL") || !strings.Contains(out, "under --min-age 1h0m0s") || !reserved() {
		t.Errorf("gc --apply --min-age 1h with a 10 min old reservation: exit %d:\n%s", rc, out)
	}

	// Held while gc runs; a gc that DELs anyway would wait on it, so it
	// is let go after a while at the latest, and the DEL then shows.
	lock, err := filelock.Lock(filepath.Join(n.ipamData, "nodenet", "lock"), 0o600)
	must(t, err)
	gcDone := make(chan struct{})
	go func() {
		select {
		case <-gcDone:
		case <-time.After(20 * time.Second):
		}
		lock.Close()
	}()
	out, rc = n.cli("gc", "--apply")
	close(gcDone)
	if rc != 0 || strings.Contains(out, "DEL") || !strings.Contains(out, "nodenet: skips its unowned reservations this round (lock ") || !reserved() {
		t.Errorf("gc --apply while the network's lock is held: exit %d:\n%s", rc, out)
	}

	// A cache entry that cannot be read may be the owner.
	garbage := filepath.Join(n.cache, "results", "nodenet-ctr-x-eth0")
	must(t, os.WriteFile(garbage, []byte("{not json"), 0o600))
	out, rc = n.cli("gc", "--apply")
	if rc != 0 || strings.Contains(out, "DEL") || !strings.Contains(out, "nodenet: keeps 1 unowned reservation(s) (unreadable cache entries") || !reserved() {
		t.Errorf("gc --apply with an unreadable cache entry: exit %d:\n%s", rc, out)
	}
	must(t, os.Remove(garbage))

	out, rc = n.cli("gc", "--apply")
	if rc != 0 || !strings.Contains(out, "nodenet: DEL ctr-lost eth0 (releases unowned reservation(s) "+ipLost+", 10m") || reserved() {
		t.Errorf("gc --apply, lock free, reservation old: exit %d:\n%s", rc, out)
	}
	if ents, _ := os.ReadDir(filepath.Join(n.ipamData, "nodenet")); !hasOnlyAddr(ents, ipLive) {
		t.Errorf("reservations after gc: %v, want only %s", ents, ipLive)
	}
}

// syncBuffer is a bytes.Buffer a running process writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startGCLoop starts `cniforge gc --apply` with args (--every and the
// like) in n's host namespace, and returns its output as it comes, the
// process, and its exit once it ends. The test's end kills it (harmless
// after exit).
func (n *node) startGCLoop(args ...string) (*syncBuffer, *exec.Cmd, chan error) {
	n.t.Helper()
	out := &syncBuffer{}
	var cmd *exec.Cmd
	must(n.t, n.hostNS.Do(func() error {
		cmd = exec.Command(testutil.Multicall(n.t), n.cliArgs(append([]string{"gc", "--apply"}, args...)...)...)
		cmd.Stdout, cmd.Stderr = out, out
		return cmd.Start()
	}))
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	n.t.Cleanup(func() { _ = cmd.Process.Kill() })
	return out, cmd, exited
}

// stopGCLoop ends what startGCLoop started with SIGTERM: it must exit 0
// (within a minute, so that a hang fails here rather than at the
// suite's timeout).
func (n *node) stopGCLoop(out *syncBuffer, cmd *exec.Cmd, exited chan error) {
	n.t.Helper()
	must(n.t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		if err != nil {
			n.t.Errorf("gc --every after SIGTERM: %v\n%s", err, out.String())
		}
	case <-time.After(60 * time.Second):
		n.t.Fatalf("gc --every did not stop on SIGTERM:\n%s", out.String())
	}
}

// gc --every: one line per action, a failing DEL does not stop later
// rounds, SIGTERM ends it.
func TestGCLoop(t *testing.T) {
	n := newNode(t)
	n.attach("ctr-live")
	bad, gone1, gone2 := n.attach("ctr-bad"), n.attach("ctr-gone1"), n.attach("ctr-gone2")
	// ctr-bad's cached config names a plugin that does not exist: its DEL
	// fails in every round.
	cached := filepath.Join(n.cache, "results", "nodenet-ctr-bad-eth0")
	b, err := os.ReadFile(cached)
	must(t, err)
	var entry map[string]any
	must(t, json.Unmarshal(b, &entry))
	var e cacheEntry
	must(t, json.Unmarshal(b, &e))
	entry["config"] = bytes.Replace(e.Config, []byte(`"type":"bridge"`), []byte(`"type":"no-such-plugin"`), 1)
	b, err = json.Marshal(entry)
	must(t, err)
	must(t, os.WriteFile(cached, b, 0o600))
	must(t, bad.rm())
	must(t, gone1.rm())

	out, cmd, exited := n.startGCLoop("--every", "100ms")
	waitFor := func(what string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !strings.Contains(out.String(), what) {
			if time.Now().After(deadline) {
				t.Fatalf("gc --every never printed %q:\n%s", what, out.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("nodenet: DEL ctr-gone1 eth0 (netns " + gone1.ns.Path() + " is gone)")
	waitFor("nodenet: DEL ctr-bad eth0 failed: ")
	// A later round still acts.
	must(t, gone2.rm())
	waitFor("nodenet: DEL ctr-gone2 eth0 (netns " + gone2.ns.Path() + " is gone)")
	n.stopGCLoop(out, cmd, exited)
	text := out.String()
	t.Logf("gc --apply --every 100ms:\n%s", text)
	stamp := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ `)
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if !stamp.MatchString(line) {
			t.Errorf("line without a time: %q", line)
		}
	}
	if !strings.HasSuffix(text, "stopped by a signal\n") {
		t.Errorf("gc --every did not say it stopped:\n%s", text)
	}
	if strings.Contains(text, "round failed") {
		t.Errorf("a failed DEL printed more than its own line:\n%s", text)
	}
	if strings.Count(text, "DEL ctr-gone1") != 1 {
		t.Errorf("ctr-gone1 DELed more than once:\n%s", text)
	}
	st := n.ls()
	var ids []string
	for _, a := range st.Attachments {
		ids = append(ids, a.ContainerID)
	}
	if fmt.Sprint(ids) != "[ctr-bad ctr-live]" {
		t.Errorf("attachments left: %v, want ctr-bad (its DEL fails) and ctr-live", ids)
	}
}

// Multus runs libcni on each delegate with its own cache dir (its cniDir,
// /var/lib/cni/multus), and keeps each pod's delegate list there under the
// container ID: their reservations are Multus's, not leaked.
func TestGCKeepsWhatMultusOwns(t *testing.T) {
	n := newNode(t)
	n.attach("ctr-live")
	podG := n.attachAs(n.multus, "pod-g", "net1")
	ipM := n.attachAs(n.multus, "pod-m", "net1").ip
	ipS := n.attachAs(n.multus, "pod-s", "net2").ip
	// pod-s is known only by the delegate list Multus keeps for its DEL.
	must(t, os.Remove(filepath.Join(n.multus, "results", "nodenet-pod-s-net2")))
	conf, err := os.ReadFile(filepath.Join(n.conf, "10-nodenet.conflist"))
	must(t, err)
	delegates, err := json.Marshal([]map[string]any{{
		"Conf":              map[string]any{"cniVersion": "1.1.0", "name": "nodenet"},
		"ConfList":          map[string]any{"cniVersion": "1.1.0", "name": "nodenet", "plugins": []any{map[string]any{"type": "bridge"}}},
		"Name":              "nodenet",
		"ifnameRequest":     "net2",
		"IsFilterV4Gateway": false,
		"IsFilterV6Gateway": false,
		"Bytes":             conf,
	}})
	must(t, err)
	must(t, os.WriteFile(filepath.Join(n.multus, "pod-s"), delegates, 0o600))
	// A delegate such as macvlan or SR-IOV leaves no veth on the host,
	// nothing else gc could see the pod by: take the bridge's away.
	// pod-g's too, before its netns goes: the kernel destroys a removed
	// namespace, and the host end of its veth, asynchronously, so the
	// snapshots below could see that veth and then not. LinkDel returns
	// with both ends gone.
	h, err := n.hostNS.Handle()
	must(t, err)
	links, err := ip.LinkList(h)
	must(t, err)
	for _, l := range links {
		if a := l.Attrs().Alias; a == "cni:pod-m:net1" || a == "cni:pod-s:net2" || a == "cni:pod-g:net1" {
			must(t, h.LinkDel(l))
		}
	}
	h.Close()
	must(t, podG.rm()) // Multus's to DEL, with the pod's DEL
	n.age(ipM)
	n.age(ipS)

	st := n.ls()
	if len(st.Orphans) != 0 || fmt.Sprint(st.MultusPods) != "[pod-g pod-m pod-s]" {
		t.Errorf("ls: orphans %+v, Multus pods %v; want none, and pod-g, pod-m and pod-s", st.Orphans, st.MultusPods)
	}
	var multus []string
	for _, a := range st.Attachments {
		if a.Cache == "multus" {
			multus = append(multus, a.ContainerID+" "+a.IfName+" "+strings.Join(a.IPs, ","))
		}
	}
	if len(multus) != 2 || multus[1] != "pod-m net1 "+ipM+"/24" {
		t.Errorf("ls: Multus attachments %v, want pod-g's and pod-m's", multus)
	}
	text, _ := n.cli("ls")
	t.Logf("cniforge ls:\n%s", text)
	if !strings.Contains(text, "attachments Multus delegated (its cache "+n.multus+"; pods: 3):") ||
		!strings.Contains(text, "nodenet  pod-m      net1") {
		t.Errorf("ls does not show Multus's attachments:\n%s", text)
	}
	n.gcApplyKeeps("Multus's reservations", "DEL ",
		"nodenet: keeps pod-g net1 (netns gone, but a delegate of Multus's")
}

// gc looping at a short interval while pods come and go through libcni,
// several at once as on a busy node: every ADD and DEL succeeds, no address
// is held twice, the live pods keep everything, and every pod whose netns
// was deleted without a DEL is reclaimed.
func TestGCLoopWhilePodsComeAndGo(t *testing.T) {
	n := newNode(t)
	out, cmd, exited := n.startGCLoop("--every", "10ms")

	const pods, workers = 64, 64 // 64 ADDs at once, as issue 24 asks
	type pod struct {
		id   string
		ns   *ns.NetNS
		rm   func() error
		ip   string
		fate string // "live", "del" (a DEL), "leak" (netns deleted without one)
		err  error
	}
	all := make([]*pod, pods)
	for i := range all {
		all[i] = &pod{id: fmt.Sprintf("pod-%02d", i), fate: [...]string{"live", "del", "leak"}[i%3]}
	}
	t.Cleanup(func() {
		for _, p := range all {
			if p.rm != nil {
				_ = p.rm()
			}
		}
	})
	work := make(chan *pod)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for p := range work {
				var err error
				if p.ns, p.rm, err = testutil.CreateNS(); err != nil {
					p.err = err
					continue
				}
				if p.ip, p.err = n.tryAdd(n.cache, p.id, "eth0", p.ns); p.err != nil {
					continue
				}
				switch p.fate {
				case "del":
					p.err = n.del(p.id, p.ns)
				case "leak":
					p.err = p.rm()
				}
			}
		})
	}
	for _, p := range all {
		work <- p
	}
	close(work)
	wg.Wait()
	for _, p := range all {
		if p.err != nil {
			t.Errorf("%s (%s): %v", p.id, p.fate, p.err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Until gc has reclaimed every leaked pod: the cache holds the live ones.
	var live []string
	liveIP := map[string]string{}
	for _, p := range all {
		if p.fate == "live" {
			live = append(live, p.id)
			if other, dup := liveIP[p.ip]; dup {
				t.Errorf("%s and %s both hold %s", other, p.id, p.ip)
			}
			liveIP[p.ip] = p.id
		}
	}
	cached := func() []string {
		ents, _ := os.ReadDir(filepath.Join(n.cache, "results"))
		var ids []string
		for _, e := range ents {
			ids = append(ids, strings.TrimSuffix(strings.TrimPrefix(e.Name(), "nodenet-"), "-eth0"))
		}
		return ids
	}
	deadline := time.Now().Add(60 * time.Second)
	for fmt.Sprint(cached()) != fmt.Sprint(live) {
		if time.Now().After(deadline) {
			t.Fatalf("cache holds %v, want the live pods %v; gc printed:\n%s", cached(), live, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	n.stopGCLoop(out, cmd, exited)
	text := out.String()
	t.Logf("gc --apply --every 10ms:\n%s", text)

	// The reservations are the live pods', each owned by its pod; each live
	// pod still has its veth and its masquerade rule.
	ents, err := os.ReadDir(filepath.Join(n.ipamData, "nodenet"))
	must(t, err)
	held := map[string]string{}
	for _, e := range ents {
		if strings.Count(e.Name(), ".") == 3 && !strings.HasPrefix(e.Name(), "last") {
			b, err := os.ReadFile(filepath.Join(n.ipamData, "nodenet", e.Name()))
			must(t, err)
			id, _, _ := strings.Cut(string(b), "\r\n")
			held[e.Name()] = id
		}
	}
	if fmt.Sprint(held) != fmt.Sprint(liveIP) {
		t.Errorf("reservations %v, want the live pods' %v", held, liveIP)
	}
	rules := n.nft()
	h, err := n.hostNS.Handle()
	must(t, err)
	defer h.Close()
	links, err := ip.LinkList(h)
	must(t, err)
	aliases := map[string]bool{}
	for _, l := range links {
		aliases[l.Attrs().Alias] = true
	}
	for _, p := range all {
		hasRule := strings.Contains(rules, "id: "+p.id+"\"")
		if hasRule != (p.fate == "live") {
			t.Errorf("%s (%s): masquerade rule there: %v", p.id, p.fate, hasRule)
		}
		if aliases["cni:"+p.id+":eth0"] != (p.fate == "live") {
			t.Errorf("%s (%s): host veth there: %v", p.id, p.fate, aliases["cni:"+p.id+":eth0"])
		}
		dels := strings.Count(text, "nodenet: DEL "+p.id+" eth0 (netns")
		if want := map[string]int{"live": 0, "del": 0, "leak": 1}[p.fate]; dels != want {
			t.Errorf("%s (%s): gc DELed it %d times, want %d", p.id, p.fate, dels, want)
		}
	}
	if regexp.MustCompile(`: DEL \S+ \S+ failed`).MatchString(text) {
		t.Errorf("a DEL of gc's failed:\n%s", text)
	}
}

// gcApplyKeeps runs `gc --apply` on n and fails the test unless it exits
// 0, its output has no del and says each of keeps, and the node is as it
// was before. what names the case in failures.
func (n *node) gcApplyKeeps(what, del string, keeps ...string) {
	n.t.Helper()
	before := n.snapshot()
	out, rc := n.cli("gc", "--apply")
	n.t.Logf("gc --apply:\n%s", out)
	ok := rc == 0 && !strings.Contains(out, del)
	for _, k := range keeps {
		ok = ok && strings.Contains(out, k)
	}
	if !ok {
		n.t.Errorf("gc --apply, %s: exit %d:\n%s", what, rc, out)
	}
	if after := n.snapshot(); after != before {
		n.t.Errorf("gc --apply, %s, changed the node:\nbefore:\n%s\nafter:\n%s", what, before, after)
	}
}
