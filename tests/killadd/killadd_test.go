package killadd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/kernelfeature"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

// Trial counts per scenario: the CI count by default; KILLADD_TRIALS and
// KILLADD_GC_TRIALS raise them (scripts/killadd.sh runs the full count).
var (
	delTrials = envInt("KILLADD_TRIALS", 20)
	gcTrials  = envInt("KILLADD_GC_TRIALS", 6)
)

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil && v > 0 {
		return v
	}
	return def
}

const ifName = "eth0"

// killSpan is how far past an unkilled ADD's duration kill moments reach:
// some kills land after the plugin finished (its result is then cached and
// DEL gets it as prevResult).
const killSpan = 1.2

// rig is one scenario's world: the stand-in host, its state folders, the
// runtime (libcni with the killing exec and a cache folder of its own) and
// the baseline snapshot every trial must return to.
type rig struct {
	sc   scenario
	env  *env
	list *libcni.NetworkConfigList
	cni  *libcni.CNIConfig
	exec *killExec
	tag  string // makes this run's container IDs unique
	// baseline is the snapshot after complete ADD+DEL cycles (bridges,
	// ip_forward and the shared nftables tables stay by design).
	baseline testutil.NodeSnapshot
	// samples are the durations of recent unkilled ADDs of the target: kill
	// moments follow the machine's current speed.
	samples []time.Duration
	gcMode  bool // the GC variant runs
}

func newRig(sc scenario) *rig {
	GinkgoHelper()
	e := newEnv()
	if sc.setup != nil {
		sc.setup(e)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	list, err := libcni.ConfListFromBytes(marshal(map[string]any{
		"cniVersion": "1.1.0", "name": "killadd", "plugins": sc.plugins(e),
	}))
	Expect(err).NotTo(HaveOccurred())
	x := &killExec{}
	path := []string{testutil.BinDir()}
	if sc.watchIPAM != "" {
		// A copy of its own, first on CNI_PATH: the watch sees this rig's
		// execs only.
		dir := GinkgoT().TempDir()
		bin, err := os.ReadFile(filepath.Join(testutil.BinDir(), sc.watchIPAM))
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(dir, sc.watchIPAM), bin, 0o755)).To(Succeed())
		stop := make(chan struct{})
		DeferCleanup(func() { close(stop) })
		Expect(x.watchIPAM(filepath.Join(dir, sc.watchIPAM), stop)).To(Succeed())
		path = append([]string{dir}, path...)
	}
	r := &rig{sc: sc, env: e, list: list, exec: x, tag: hex.EncodeToString(b),
		cni: libcni.NewCNIConfigWithCacheDir(path, GinkgoT().TempDir(), x)}
	return r
}

func marshal(v any) []byte {
	GinkgoHelper()
	b, err := json.Marshal(v)
	Expect(err).NotTo(HaveOccurred())
	return b
}

func (r *rig) runtimeConf(id string, contNS *ns.NetNS) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: id, NetNS: contNS.Path(), IfName: ifName, CapabilityArgs: r.sc.caps}
}

// add runs the list's ADD as the runtime does, armed to kill the target at
// delay after its start.
func (r *rig) add(rt *libcni.RuntimeConf, delay time.Duration) error {
	r.exec.arm(r.sc.target, delay)
	return r.env.hostNS.Do(func() error {
		r.exec.startList()
		_, err := r.cni.AddNetworkList(context.Background(), r.list, rt)
		r.exec.endList()
		return err
	})
}

func (r *rig) del(rt *libcni.RuntimeConf) error {
	return r.env.hostNS.Do(func() error { return r.cni.DelNetworkList(context.Background(), r.list, rt) })
}

// gc runs libcni's GC with no attachment valid: an empty list, or (odd i)
// no list at all.
func (r *rig) gc(i int) error {
	args := &libcni.GCArgs{}
	if i%2 == 1 {
		args = nil
	}
	return r.env.hostNS.Do(func() error { return r.cni.GCNetworkList(context.Background(), r.list, args) })
}

// snapshot is the stand-in host, contNS and the state folders: what a
// killed ADD could leave, link attributes (tuning's mtu, mac, txqlen,
// promisc, allmulti; a host-device left renamed), qdiscs and filters
// (bandwidth's, on the ifb too), routes and rules of every table (sbr),
// sysctls (tuning, bridge, ptp, portmap), the netfilter rule set, and
// every file under the plugins' state folders (host-local's index,
// tuning's saved state, the dhcp daemon's leases).
func (r *rig) snapshot(contNS *ns.NetNS) testutil.NodeSnapshot {
	GinkgoHelper()
	e := r.env
	s := testutil.TakeNodeSnapshot(testutil.NodeOpts{Host: e.hostNS, Cont: contNS, Sysctls: true, Netfilter: true,
		Dirs: e.stateDirs(), NameOnly: contentMoves, NoBridgeMAC: true})
	// The DHCP server's leases: DEL releases the attachment's. Not after
	// GC: the container's namespace is gone, and with it the interface a
	// DHCPRELEASE would leave by, so the server's lease runs out by itself.
	if e.dnsmasq != nil && !r.gcMode {
		var leases []string
		for ip := range e.dnsmasq.Leases() {
			leases = append(leases, ip)
		}
		s = append(s, testutil.Lines("dnsmasq lease", leases)...)
		slices.Sort(s)
	}
	return s
}

// measure runs full ADD+DEL cycles in contNS, records the target's ADD
// durations and takes the baseline.
func (r *rig) measure(contNS *ns.NetNS) {
	GinkgoHelper()
	for i := range 4 {
		id := fmt.Sprintf("killadd-%s-measure-%d", r.tag, i)
		rt := r.runtimeConf(id, contNS)
		Expect(r.add(rt, time.Minute)).To(Succeed(), "unkilled ADD")
		killed, _, ran := r.exec.outcome()
		Expect(killed).To(BeFalse())
		r.samples = append(r.samples, ran)
		Expect(r.del(rt)).To(Succeed(), "DEL")
		Expect(filesNaming(r.env.stateDirs(), id)).To(BeEmpty())
	}
	r.baseline = r.snapshot(contNS)
	Expect(testutil.LinkNames(contNS)).To(Equal([]string{"lo"}))
}

// addTime is the median of the last 21 unkilled ADDs: one slow run on a
// busy machine must not push most kills past the end of ADD.
func (r *rig) addTime() time.Duration {
	recent := slices.Clone(r.samples[max(0, len(r.samples)-21):])
	slices.Sort(recent)
	return recent[len(recent)/2]
}

// trial is how one kill went.
type trial struct {
	id        string
	delay     time.Duration
	addTime   time.Duration // the estimate delay was drawn against
	killedIn  string        // the plugin killed ("" when ADD completed)
	completed bool          // ADD finished before the kill (the runtime cached its result)
	leaks     []string
}

// killAdd runs ADD of rt with the kill at frac times the target's current
// ADD duration.
func (r *rig) killAdd(rt *libcni.RuntimeConf, frac float64) trial {
	GinkgoHelper()
	t := trial{id: rt.ContainerID, addTime: r.addTime()}
	t.delay = time.Duration(frac * float64(t.addTime))
	err := r.add(rt, t.delay)
	killed, in, ran := r.exec.outcome()
	switch {
	case killed:
		t.killedIn = in
		Expect(errors.Is(err, errKilled) || strings.Contains(fmt.Sprint(err), errKilled.Error())).To(BeTrue(), "ADD: %v", err)
	case err != nil:
		// An ADD that ran to its end must succeed: a failure here is a
		// leftover of an earlier trial in the way, or a bug.
		t.leaks = append(t.leaks, fmt.Sprintf("ADD failed: %v", err))
	default:
		t.completed = true
		if ran > 0 {
			r.samples = append(r.samples, ran)
		}
	}
	return t
}

// settle compares the snapshot with the baseline until they are equal or
// wait passes (the kernel removes a dead namespace's veth, and with it the
// host end, asynchronously) and returns the difference left.
func (r *rig) settle(contNS *ns.NetNS, wait time.Duration) string {
	GinkgoHelper()
	deadline := time.Now().Add(wait)
	for {
		got := r.snapshot(contNS)
		if slices.Equal(got, r.baseline) {
			return ""
		}
		if time.Now().After(deadline) {
			return r.baseline.Diff(got)
		}
		time.Sleep(20 * time.Millisecond) // test-only poll of the kernel's async cleanup
	}
}

// fractions are n kill moments, as fractions of an unkilled ADD's
// duration, spread uniformly from 0 to killSpan and shuffled.
func fractions(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = killSpan * float64(i) / float64(max(n-1, 1))
	}
	mrand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// tally counts trials and reports them.
type tally struct {
	name                     string
	trials, completed, leaks int
	killedIn                 map[string]int
	minADD, maxADD           time.Duration
}

func (t *tally) add(tr trial) {
	t.trials++
	if t.trials%50 == 0 {
		// A long run (scripts/killadd.sh) shows where it is.
		fmt.Printf("\nprogress %s: %d trials, %d leaks so far\n", t.name, t.trials, t.leaks+min(len(tr.leaks), 1))
	}
	if tr.completed {
		t.completed++
	} else {
		if t.killedIn == nil {
			t.killedIn = map[string]int{}
		}
		t.killedIn[tr.killedIn]++
	}
	if t.minADD == 0 || tr.addTime < t.minADD {
		t.minADD = tr.addTime
	}
	t.maxADD = max(t.maxADD, tr.addTime)
	if len(tr.leaks) > 0 {
		t.leaks++
		GinkgoWriter.Printf("LEAK %s trial %s (kill after %v, ADD takes about %v, killed in %q):\n  %s\n",
			t.name, tr.id, tr.delay, tr.addTime, tr.killedIn, strings.Join(tr.leaks, "\n  "))
		fmt.Printf("\nLEAK %s trial %s (kill after %v, ADD takes about %v, killed in %q):\n  %s\n",
			t.name, tr.id, tr.delay, tr.addTime, tr.killedIn, strings.Join(tr.leaks, "\n  "))
	}
}

func (t *tally) report() {
	var where []string
	for k, v := range t.killedIn {
		where = append(where, fmt.Sprintf("%s %d", k, v))
	}
	slices.Sort(where)
	line := fmt.Sprintf("KILLADD %s: %d trials, %d leaks (%d killed mid-ADD [%s], %d ADDs finished first; kills over 0-%.1fx an unkilled ADD of %v-%v)",
		t.name, t.trials, t.leaks, t.trials-t.completed, strings.Join(where, ", "), t.completed, killSpan,
		t.minADD.Round(time.Millisecond), t.maxADD.Round(time.Millisecond))
	GinkgoWriter.Println(line)
	AddReportEntry(t.name, line)
	// Also on stdout, on a line of its own (Ginkgo's progress marks have no
	// newline), so the counts show in a plain `go test -v` log and
	// scripts/killadd.sh can collect them.
	fmt.Printf("\n%s\n", line)
}

// rebase makes the state after a leak the new baseline (after a GC that
// keeps nothing and the container's links removed), so the next trials
// count on their own.
func (r *rig) rebase(contNS *ns.NetNS) {
	GinkgoHelper()
	_ = r.gc(0) // best effort: what stays is in the new baseline
	if contNS != nil {
		h, err := contNS.Handle()
		Expect(err).NotTo(HaveOccurred())
		links, err := ip.LinkList(h)
		Expect(err).NotTo(HaveOccurred())
		for _, l := range links {
			if l.Attrs().Name != "lo" {
				_ = h.LinkDel(l) // best effort, as above
			}
		}
		h.Close()
	}
	r.baseline = r.snapshot(contNS)
}

// runDel runs delTrials kills of ADD, each followed by the runtime's DEL
// (libcni's, with the cached result when ADD completed), in one container
// namespace: every DEL must empty it.
func (r *rig) runDel() *tally {
	GinkgoHelper()
	contNS := testutil.NewNS()
	r.measure(contNS)
	t := &tally{name: r.sc.name + " kill+DEL"}
	for i, frac := range fractions(delTrials) {
		rt := r.runtimeConf(fmt.Sprintf("killadd-%s-del-%04d", r.tag, i), contNS)
		tr := r.killAdd(rt, frac)
		if err := r.del(rt); err != nil {
			tr.leaks = append(tr.leaks, fmt.Sprintf("DEL failed: %v", err))
		}
		r.judge(t, tr, contNS, rt.ContainerID, 2*time.Second)
	}
	return t
}

// judge adds trial tr of container id to t, with what it leaked: how the
// host and n differ from the baseline once settled (waiting up to wait),
// and the state files still naming id. A trial that leaked makes its
// state the new baseline, so the next one is judged on its own.
func (r *rig) judge(t *tally, tr trial, n *ns.NetNS, id string, wait time.Duration) {
	GinkgoHelper()
	if d := r.settle(n, wait); d != "" {
		tr.leaks = append(tr.leaks, "state differs from the baseline:\n"+d)
	}
	tr.leaks = append(tr.leaks, filesNaming(r.env.stateDirs(), id)...)
	t.add(tr)
	if len(tr.leaks) > 0 {
		r.rebase(n)
	}
}

// runGC runs gcTrials kills of ADD, each followed by the removal of the
// container namespace (the runtime removes the pod's namespace, and the
// veth with it) and libcni's GC with no attachment valid.
func (r *rig) runGC() *tally {
	GinkgoHelper()
	emptyNS := testutil.NewNS() // the snapshot's container side: stays empty
	r.gcMode = true
	if len(r.samples) == 0 {
		r.measure(emptyNS)
	} else {
		r.baseline = r.snapshot(emptyNS)
	}
	t := &tally{name: r.sc.name + " kill+GC"}
	for i, frac := range fractions(gcTrials) {
		contNS, removeNS, err := testutil.CreateNS()
		Expect(err).NotTo(HaveOccurred())
		rt := r.runtimeConf(fmt.Sprintf("killadd-%s-gc-%04d", r.tag, i), contNS)
		tr := func() trial {
			defer func() { Expect(removeNS()).To(Succeed()) }() // also when killAdd fails the spec
			return r.killAdd(rt, frac)
		}()
		if err := r.gc(i); err != nil {
			tr.leaks = append(tr.leaks, fmt.Sprintf("GC failed: %v", err))
		}
		r.judge(t, tr, emptyNS, rt.ContainerID, 30*time.Second)
	}
	return t
}

// The comparison itself: an attachment that is still there must show, in
// every part of the snapshot the trials rely on.
var _ = Describe("the trials' snapshot", func() {
	It("shows every part of a full-chain attachment left in place, and none after its DEL", func() {
		var sc scenario
		for _, s := range scenarios {
			if s.name == "full chain/iptables" {
				sc = s
			}
		}
		r := newRig(sc)
		contNS := testutil.NewNS()
		r.measure(contNS)
		rt := r.runtimeConf("killadd-"+r.tag+"-shown", contNS)
		Expect(r.add(rt, time.Minute)).To(Succeed())
		changes := r.baseline.Changes(r.snapshot(contNS))
		data, tuning := regexp.QuoteMeta(filepath.Base(r.env.dataDir)), regexp.QuoteMeta(filepath.Base(r.env.tuningDir))
		for _, want := range []string{
			`^container link: \+ eth0 index=\d+ type=veth .*mtu=1400 `, `^container addr: \+ eth0 10\.77\.0\.`,
			`^container route: \+ table=254 .* gw=10\.77\.0\.1 dev=eth0 `,
			`^host link: \+ veth`, `^host qdisc: \+ `, `^host filter: \+ `,
			`^container sysctl: \+ /proc/sys/net/ipv4/conf/eth0/arp_filter = 1$`,
			`^netfilter: \+ `, `^file: \+ ` + data + `/killadd/10\.77\.0\.\d+ file `, `^file: \+ ` + data + `/killadd/fd00:77::`,
			`^file: \+ ` + tuning + `/`,
		} {
			Expect(changes).To(ContainElement(MatchRegexp(want)))
		}
		Expect(filesNaming(r.env.stateDirs(), rt.ContainerID)).NotTo(BeEmpty())
		Expect(r.del(rt)).To(Succeed())
		Expect(r.settle(contNS, 2*time.Second)).To(BeEmpty())
	})
})

var _ = Describe("SIGKILL of the plugin's process group during ADD, then the runtime's DEL or GC", func() {
	for _, sc := range scenarios {
		labels := Labels{}
		if len(sc.features) > 0 {
			labels = append(labels, kernelfeature.Label)
		}
		It(sc.name+" leaves nothing of the attachment", labels, func() {
			if len(sc.features) > 0 {
				requireFeatures(sc.features)
			}
			// One rig for both: the GC campaign reuses the DEL campaign's
			// measurements, on a baseline of its own.
			r := newRig(sc)
			tallies := []*tally{r.runDel()}
			if !sc.noGC {
				tallies = append(tallies, r.runGC())
			}
			leaks := 0
			for _, t := range tallies {
				t.report()
				leaks += t.leaks
			}
			Expect(leaks).To(BeZero(), "see the LEAK lines above")
		})
	}
})

// env is what a scenario's plugins need of the stand-in host: its
// namespace and the plugins' state folders.
type env struct {
	hostNS    *ns.NetNS
	dataDir   string // host-local's
	tuningDir string
	dhcpDir   string // the dhcp daemon's socket and state (short: a socket path has 108 bytes)
	dnsmasq   *testutil.Dnsmasq
}

func newEnv() *env {
	GinkgoHelper()
	dhcpDir, err := os.MkdirTemp("", "kadhcp")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dhcpDir)
	return &env{hostNS: testutil.NewNS(), dataDir: GinkgoT().TempDir(), tuningDir: GinkgoT().TempDir(), dhcpDir: dhcpDir}
}

func (e *env) stateDirs() []string {
	return []string{e.dataDir, e.tuningDir, filepath.Join(e.dhcpDir, "state")}
}

// contentMoves names the files whose content changes by design without
// holding any attachment's state: host-local's cursor of the last address
// handed out, its index's generation stamp, and the index snapshot, where a
// released attachment's record is erased in place (dashes; a rebuild after
// a kill can leave such a record where the baseline had none). The snapshot
// holds their names only; filesNaming still reads them for the container
// ID, and the reservations are compared as files.
func contentMoves(rel string) bool {
	base := filepath.Base(rel)
	return strings.HasPrefix(base, "last_reserved_ip.") || base == "stamp" || base == "snapshot"
}
