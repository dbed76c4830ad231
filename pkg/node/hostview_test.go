package node

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cniforge/plugins/pkg/testutil"
)

// Only a path positively gone, seen from the host's mount namespace, in a
// folder that is there, is "gone"; everything else gc must keep.
func TestNetnsStateTakesProof(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("needs root (network namespaces)")
	}
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain") // a netns file whose mount this namespace does not see
	must(t, os.WriteFile(plain, nil, 0o444))
	loop := filepath.Join(dir, "loop")
	must(t, os.Symlink(loop, loop))
	live, _ := testutil.NewTestNS(t)
	// A process that has exited: its /proc path is gone, but its netns
	// may live on in other processes.
	done := exec.Command("true")
	must(t, done.Run())
	deadProc := fmt.Sprintf("/proc/%d/ns/net", done.Process.Pid)

	host := hostView{ok: true}
	other := hostView{why: "not run in the host's mount namespace"}
	for _, c := range []struct {
		name, path string
		view       hostView
		want       string
	}{
		{"a live namespace", live.Path(), host, nsLive},
		{"a live process's", "/proc/self/ns/net", host, nsLive},
		{"missing, in a folder that is there, host view", filepath.Join(dir, "gone"), host, nsGone},
		{"missing, not the host's mount namespace", filepath.Join(dir, "gone"), other, nsUnknown},
		{"missing folder", filepath.Join(dir, "nodir", "ns"), host, nsUnknown},
		{"plain file", plain, host, nsUnknown},
		{"stat error ENOTDIR", filepath.Join(plain, "ns"), host, nsUnknown},
		{"stat error ELOOP", loop, host, nsUnknown},
		{"a process that exited", deadProc, host, nsUnknown},
		{"none recorded", "", host, nsUnknown},
	} {
		got, why := netnsState(c.path, c.view)
		if got != c.want {
			t.Errorf("%s: netnsState(%q) = %s (%s), want %s", c.name, c.path, got, why, c.want)
		}
		if got == nsUnknown && why == "" {
			t.Errorf("%s: unknown without a reason", c.name)
		}
	}
}

// A missing netns file is proof only where the tool shows it sees the
// host's mount namespace: the kernel's initial one, or pid 1's when pid 1
// is the host's init (this process in the initial pid namespace).
func TestHostViewNeedsTheHostsInit(t *testing.T) {
	const other = 0xF0000123 // some namespace's inode, not an initial one
	initMnt := nsLink{dev: 4, ino: initialMntNSIno, nsfs: true}
	initPid := nsLink{dev: 4, ino: initialPidNSIno, nsfs: true}
	mnt := nsLink{dev: 4, ino: other, nsfs: true}
	pid := nsLink{dev: 4, ino: other + 1, nsfs: true}
	fake := func(l nsLink) nsLink { l.nsfs = false; return l }
	failed := nsLink{err: syscall.EACCES}
	for _, c := range []struct {
		name                 string
		selfMnt, selfPid, p1 nsLink
		ok                   bool
	}{
		{"the initial mount namespace (6.18+)", initMnt, pid, failed, true},
		{"the initial mount namespace's inode on a file that is no namespace", fake(initMnt), pid, failed, false},
		{"the initial pid namespace, pid 1's mount namespace", mnt, initPid, mnt, true},
		{"the initial pid namespace, another mount namespace than pid 1's", mnt, initPid, nsLink{dev: 4, ino: other + 2, nsfs: true}, false},
		{"the initial pid namespace, pid 1's links unreadable", mnt, initPid, failed, false},
		{"a pid namespace of its own, sharing its pid 1's mount namespace", mnt, pid, mnt, false},
		{"the initial pid namespace's inode on a file that is no namespace", mnt, fake(initPid), mnt, false},
		{"its own pid namespace unreadable", mnt, failed, mnt, false},
		{"its own mount namespace unreadable", failed, initPid, mnt, false},
	} {
		v := decideHostView(c.selfMnt, c.selfPid, func() nsLink { return c.p1 })
		if v.ok != c.ok || !v.ok && v.why == "" {
			t.Errorf("%s: host view %v (%q), want %v", c.name, v.ok, v.why, c.ok)
		}
	}
}

// The review's repro: gc run as pid 1 of its own pid namespace (as in the
// DaemonSet's container), in a mount namespace whose /run/netns is an
// empty tmpfs. It shares its pid 1's mount namespace, but that pid 1 is
// not the host's init: both live pods are kept and reported.
func TestGCInItsOwnPidNamespaceKeepsLivePods(t *testing.T) {
	n := newNode(t)
	pod1, _ := testutil.NewTestNS(t)
	pod2, _ := testutil.NewTestNS(t)
	n.add("ctr-1", pod1)
	n.add("ctr-2", pod2)
	before := n.snapshot()
	// unshare --mount makes its mounts private: the tmpfs never reaches
	// the real /run/netns. sh is pid 1 and execs cniforge in its place.
	script := `mount -t tmpfs cniforge-test /run/netns && exec "$@"`
	argv := append([]string{"unshare", "--mount", "--pid", "--fork", "--mount-proc", "sh", "-c", script, "sh", testutil.Multicall(t)},
		n.cliArgs("gc", "--apply")...)
	out, rc := n.run(argv...)
	t.Logf("gc --apply as pid 1 of its own pid namespace, under a tmpfs /run/netns:\n%s", out)
	if rc != 0 || strings.Contains(out, "DEL") || !strings.Contains(out, "cannot prove any netns gone from here") {
		t.Errorf("gc --apply in its own pid namespace: exit %d:\n%s", rc, out)
	}
	for _, c := range []struct{ id, path string }{{"ctr-1", pod1.Path()}, {"ctr-2", pod2.Path()}} {
		if !strings.Contains(out, "nodenet: keeps "+c.id+" eth0 (netns "+c.path+": run in a pid namespace of its own") {
			t.Errorf("gc did not report keeping %s:\n%s", c.id, out)
		}
	}
	if after := n.snapshot(); after != before {
		t.Errorf("gc in its own pid namespace changed the node:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// Where the operator says the runtime makes its netns files in gc's own
// mount namespace (--runtime-mount-ns: a test node in namespaces of its
// own, as the CRI lane's), gc in its own pid namespace DELs the pod whose
// netns file is really gone, and keeps the live one.
func TestGCRuntimeMountNSTakesTheOperatorsWord(t *testing.T) {
	n := newNode(t)
	_, gone, rm := n.liveAndGone()
	must(t, rm())
	argv := append([]string{"unshare", "--mount", "--pid", "--fork", "--mount-proc", testutil.Multicall(t)},
		n.cliArgs("gc", "--apply", "--runtime-mount-ns")...)
	out, rc := n.run(argv...)
	t.Logf("gc --apply --runtime-mount-ns in its own pid namespace:\n%s", out)
	if rc != 0 || !strings.Contains(out, "nodenet: DEL ctr-gone eth0 (netns "+gone.Path()+" is gone)") {
		t.Errorf("gc --apply --runtime-mount-ns: exit %d:\n%s", rc, out)
	}
	if strings.Contains(out, "DEL ctr-live") {
		t.Errorf("gc DELed the live pod:\n%s", out)
	}
	if st := n.ls(); len(st.Attachments) != 1 || st.Attachments[0].ContainerID != "ctr-live" {
		t.Errorf("after gc: %+v", st.Attachments)
	}
}

// A DaemonSet container whose /run/netns mount was forgotten sees every
// netns file missing: gc run there must DEL nothing.
func TestGCFromAnotherMountNamespaceKeepsAll(t *testing.T) {
	n := newNode(t)
	live, _ := testutil.NewTestNS(t)
	n.add("ctr-a", live)
	before := n.snapshot()
	script := `mount -t tmpfs cniforge-test /run/netns && exec "$@"`
	argv := append([]string{"unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", testutil.Multicall(t)},
		n.cliArgs("gc", "--apply")...)
	out, rc := n.run(argv...)
	t.Logf("gc --apply under a tmpfs /run/netns:\n%s", out)
	if rc != 0 || strings.Contains(out, "DEL") || !strings.Contains(out, "nodenet: keeps ctr-a eth0 (netns "+live.Path()) {
		t.Errorf("gc --apply in another mount namespace: exit %d:\n%s", rc, out)
	}
	if after := n.snapshot(); after != before {
		t.Errorf("gc in another mount namespace changed the node:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
