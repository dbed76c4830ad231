package node

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"

	"github.com/cniforge/plugins/pkg/testutil"
)

// testdata/multus-v4.2.2 is Multus's cniDir as the thin plugin v4.2.2
// really wrote it, copied from the Kubernetes lane's multus stage
// (scripts/kube/multus.sh) while its two pods lived: mpa (17196445…:
// eth0, macvlan-net as mv1, bridge-net as net2) and mpb (986676f6…: eth0,
// macvlan-net as net1, bridge-net as br1, hostdev-net as hd1). Per pod a
// delegate list named by the container ID (its configs' keys stripped,
// multus-cni#1449, the whole config in "Bytes"), and libcni's cache of
// each delegate in results/, under Multus's own interface names.
const realMultusCache = "testdata/multus-v4.2.2"

const (
	mpa = "17196445b1466f34e1c3eadd97339737c021192bc97829ddf4e8641e1fed1c35"
	mpb = "986676f63e1fc3419938c9cbc23a7fddd0d9af9ae8ca62694dc2bc6197e660b9"
)

// A node whose host-local reservations on bridge-net belong to the two
// pods Multus delegated for: gc's state reads every delegate, with its
// network, interface and address, lists both pods as Multus's, and counts
// their reservations owned, not leaked.
func TestReadsMultusCacheAsMultusWritesIt(t *testing.T) {
	dir := t.TempDir()
	d := &Dirs{Conf: filepath.Join(dir, "net.d"), Cache: filepath.Join(dir, "cache"),
		Bin: filepath.Join(dir, "bin"), Multus: realMultusCache, RuntimeHere: true}
	data := filepath.Join(dir, "ipam")
	must(t, os.MkdirAll(filepath.Join(d.Cache, "results"), 0o755))
	must(t, os.MkdirAll(d.Conf, 0o755))
	must(t, os.WriteFile(filepath.Join(d.Conf, "10-bridge-net.conflist"), fmt.Appendf(nil,
		`{"cniVersion":"1.1.0","name":"bridge-net","plugins":[{"type":"bridge","bridge":"br-multus",
		"ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"10.99.0.0/24"}]]}}]}`, data), 0o644))
	must(t, os.MkdirAll(filepath.Join(data, "bridge-net"), 0o755))
	for ip, owner := range map[string]string{"10.99.0.2": mpa + "\r\nnet2", "10.99.0.3": mpb + "\r\nbr1"} {
		must(t, os.WriteFile(filepath.Join(data, "bridge-net", ip), []byte(owner), 0o644))
	}

	st, err := loadNode(d)
	must(t, err)
	if len(st.unreadable) != 0 {
		t.Errorf("unreadable: %v", st.unreadable)
	}
	if got := fmt.Sprint(st.MultusPods); got != fmt.Sprint([]string{mpa, mpb}) {
		t.Errorf("Multus pods %s, want mpa's and mpb's", got)
	}
	var got []string
	for _, a := range st.Attachments {
		if a.Cache != "multus" {
			t.Errorf("attachment %s %s %s not marked Multus's", a.Network, a.ContainerID, a.IfName)
		}
		got = append(got, fmt.Sprintf("%s %s %s %s", a.Network, a.ContainerID[:8], a.IfName, strings.Join(a.IPs, ",")))
	}
	sort.Strings(got)
	want := []string{
		"bridge-net 17196445 net2 10.99.0.2/24",
		"bridge-net 986676f6 br1 10.99.0.3/24",
		"hostdev-net 986676f6 hd1 10.78.0.2/24",
		"k8s-pod-network 17196445 eth0 10.88.0.3/24",
		"k8s-pod-network 986676f6 eth0 10.88.0.4/24",
		"macvlan-net 17196445 mv1 10.77.0.10/24",
		"macvlan-net 986676f6 net1 10.77.0.11/24",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Multus's delegates:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(st.Orphans) != 0 {
		t.Errorf("bridge-net's reservations of Multus's pods counted leaked: %+v", st.Orphans)
	}
}

// Multus removed while a pod lived (its binary and 00-multus.conf gone):
// the runtime's DEL went to the conf dir's next network, its cached Multus
// attachment cannot be DELed any more, and Multus never DELs the pod's
// delegates. Once the netns is gone, gc DELs them from Multus's cache,
// then drops the delegate list and the runtime's cached attachment; the
// next round has nothing to do.
func TestGCDelegatesWhenMultusIsGone(t *testing.T) {
	n := newNode(t)
	podX, rmX := testutil.NewTestNS(t)
	ipX := n.addAs(n.multus, "pod-x", "net1", podX)
	conf, err := os.ReadFile(filepath.Join(n.conf, "10-nodenet.conflist"))
	must(t, err)
	delegates, err := json.Marshal([]map[string]any{{"Name": "nodenet", "Bytes": conf}})
	must(t, err)
	must(t, os.WriteFile(filepath.Join(n.multus, "pod-x"), delegates, 0o600))
	// The runtime's cache entry of the pod's Multus attachment, as libcni
	// wrote it at ADD; no multus binary is left in the plugin dir.
	runtimeEntry := n.cacheMultusAttachment("pod-x", podX.Path())
	must(t, rmX())

	out, rc := n.cli("gc", "--apply")
	t.Logf("gc --apply:\n%s", out)
	if rc != 0 || !strings.Contains(out, `nodenet: DEL pod-x net1 (a delegate of Multus's`) {
		t.Errorf("gc did not DEL the delegate of the pod whose Multus DEL failed:\n%s", out)
	}
	for _, f := range []string{
		filepath.Join(n.ipamData, "nodenet", ipX),
		filepath.Join(n.multus, "results", "nodenet-pod-x-net1"),
		filepath.Join(n.multus, "pod-x"),
		runtimeEntry,
	} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s is left", f)
		}
	}
	if out, rc := n.cli("gc", "--apply"); rc != 0 || strings.Contains(out, "DEL") {
		t.Errorf("a second gc --apply: exit %d:\n%s", rc, out)
	}
}

// cacheMultusAttachment writes the runtime's cache entry of pod id's Multus
// attachment, as libcni wrote it at ADD; no multus binary is in the node's
// plugin dir, so its DEL fails.
func (n *node) cacheMultusAttachment(id, netns string) string {
	n.t.Helper()
	f := filepath.Join(n.cache, "results", "multus-cni-network-"+id+"-eth0")
	e, err := json.Marshal(cacheEntry{Kind: libcni.CNICacheV1, ContainerID: id, IfName: "eth0",
		NetworkName: "multus-cni-network", NetNS: netns,
		Config: []byte(`{"cniVersion":"1.0.0","name":"multus-cni-network","type":"multus"}`)})
	must(n.t, err)
	must(n.t, os.MkdirAll(filepath.Dir(f), 0o755))
	must(n.t, os.WriteFile(f, e, 0o600))
	return f
}

// A pod whose failed Multus DEL gc cannot finish (Multus knows its
// delegates only by its delegate list, no cached result to DEL with): its
// files stay, and the failed DEL counts.
func TestGCKeepsAMultusPodItCannotFinish(t *testing.T) {
	n := newNode(t)
	podY, rmY := testutil.NewTestNS(t)
	must(t, os.MkdirAll(n.multus, 0o700))
	list := filepath.Join(n.multus, "pod-y")
	must(t, os.WriteFile(list, []byte(`[{"Name":"nodenet"}]`), 0o600))
	runtimeEntry := n.cacheMultusAttachment("pod-y", podY.Path())
	must(t, rmY())
	out, rc := n.cli("gc", "--apply", "--allow-empty-cache")
	t.Logf("gc --apply:\n%s", out)
	if rc == 0 {
		t.Errorf("gc --apply: exit 0 with the pod's DEL failed and nothing DELed in its stead")
	}
	for _, f := range []string{list, runtimeEntry} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
