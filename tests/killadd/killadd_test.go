package killadd

import (
	"bytes"
	"crypto/rand"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

// Trial counts; KILLADD_TRIALS and KILLADD_GC_TRIALS override them while
// iterating on a fix.
var (
	delTrials = envInt("KILLADD_TRIALS", 200)
	gcTrials  = envInt("KILLADD_GC_TRIALS", 50)
)

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil && v > 0 {
		return v
	}
	return def
}

const ifName = "eth0"

// plugin is an interface plugin under test and its config.
type plugin struct {
	name    string
	network string
	extra   map[string]any // plugin keys besides the common ones
}

var plugins = []plugin{
	{name: "bridge", network: "killadd-bridge", extra: map[string]any{"bridge": "kabr0", "isGateway": true}},
	{name: "ptp", network: "killadd-ptp", extra: map[string]any{}},
}

// conf is the network config of p: masquerade on (so there are rules to
// leak), both families (so host-local takes two reservations).
func (p plugin) conf(dataDir, backend string) map[string]any {
	c := map[string]any{
		"cniVersion":    "1.1.0",
		"name":          p.network,
		"type":          p.name,
		"ipMasq":        true,
		"ipMasqBackend": backend,
		"ipam": map[string]any{
			"type": "host-local",
			"ranges": []any{
				[]any{map[string]any{"subnet": "10.77.0.0/24"}},
				[]any{map[string]any{"subnet": "fd00:77::/64"}},
			},
			"routes":  []any{map[string]any{"dst": "0.0.0.0/0"}},
			"dataDir": dataDir,
		},
	}
	for k, v := range p.extra {
		c[k] = v
	}
	return c
}

func marshal(c map[string]any) []byte {
	GinkgoHelper()
	b, err := json.Marshal(c)
	Expect(err).NotTo(HaveOccurred())
	return b
}

// with returns a copy of c with key set (or removed when v is nil).
func with(c map[string]any, key string, v any) map[string]any {
	out := make(map[string]any, len(c)+1)
	for k, x := range c {
		out[k] = x
	}
	if v == nil {
		delete(out, key)
	} else {
		out[key] = v
	}
	return out
}

// rig is one spec's namespaces, data dir and the state they return to
// after every trial.
type rig struct {
	p       plugin
	hostNS  *ns.NetNS
	dataDir string
	// baseline: the stand-in host's links and netfilter rules after a full
	// ADD and DEL (the bridge and the shared nftables table stay by design).
	hostLinks []string
	rules     string
	// samples are the durations of recent ADDs that ended by themselves
	// (the measured ones, then trials the kill came too late for): kill
	// moments follow the machine's current speed.
	samples []time.Duration
	tag     string // makes this run's container IDs unique
	ids     []string
}

func newRig(p plugin) *rig {
	GinkgoHelper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	r := &rig{p: p, hostNS: testutil.NewNS(), dataDir: GinkgoT().TempDir(), tag: hex.EncodeToString(b)}
	return r
}

// chain is the iptables chain of id's attachment, named as upstream names it.
func (r *rig) chain(id string) string {
	sum := sha512.Sum512([]byte(r.p.network + id))
	return "CNI-" + hex.EncodeToString(sum[:])[:24]
}

func (r *rig) backend(i int) string { return []string{"iptables", "nftables"}[i%2] }

func (r *rig) containerID(kind string, i int) string {
	id := fmt.Sprintf("killadd-%s-%s-%s-%04d", r.p.name, kind, r.tag, i)
	r.ids = append(r.ids, id)
	return id
}

// start starts ADD of the plugin binary in its own process group.
func (r *rig) start(call testutil.Call) *testutil.Proc {
	GinkgoHelper()
	var p *testutil.Proc
	Expect(r.hostNS.Do(func() (err error) {
		p, err = testutil.Start(r.p.name, call)
		return err
	})).To(Succeed())
	return p
}

func (r *rig) exec(call testutil.Call) testutil.Output {
	GinkgoHelper()
	var out testutil.Output
	Expect(r.hostNS.Do(func() (err error) {
		out, err = testutil.Exec(r.p.name, call)
		return err
	})).To(Succeed())
	return out
}

// measure runs a few ADDs to completion (each followed by DEL) in contNS,
// records their durations and takes the baseline.
func (r *rig) measure(contNS *ns.NetNS) {
	GinkgoHelper()
	for i := range 5 {
		id := r.containerID("measure", i)
		c := r.p.conf(r.dataDir, r.backend(i))
		p := r.start(testutil.Call{Command: "ADD", ContainerID: id, Netns: contNS.Path(), IfName: ifName, Stdin: marshal(c)})
		out, killed, ran, err := p.KillGroupAfter(time.Minute)
		Expect(err).NotTo(HaveOccurred())
		Expect(killed).To(BeFalse())
		Expect(out.Err).To(BeNil(), "ADD: %s", out.Stderr)
		r.samples = append(r.samples, ran)
		del := r.exec(testutil.Call{Command: "DEL", ContainerID: id, Netns: contNS.Path(), IfName: ifName,
			Stdin: marshal(with(c, "prevResult", json.RawMessage(out.Stdout)))})
		Expect(del.Err).To(BeNil(), "DEL: %s", del.Stderr)
		// The trials compare with the state left here, so it must hold
		// nothing of these attachments: iptables-save shows the rules'
		// comments (with the container ID), which nft does not for
		// iptables-nft rules; the nftables backend's comments hold it too.
		rules := r.rulesText(true)
		Expect(rules).NotTo(ContainSubstring(id))
		Expect(rules).NotTo(ContainSubstring(r.chain(id)))
		Expect(dataLeftovers(r.dataDir, id)).To(BeEmpty())
	}
	r.hostLinks = linkNames(r.hostNS)
	r.rules = r.ruleDump()
	Expect(linkNames(contNS)).To(Equal([]string{"lo"}))
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
	delay     time.Duration
	addTime   time.Duration // the estimate delay was drawn against
	completed bool          // ADD finished before the kill (its result is cached)
	addErr    string
	leaks     []string
}

// killAdd starts ADD of id into contNS and kills its process group at
// frac times the current ADD duration (unless ADD ended by itself before),
// and returns the trial so far and the DEL config: the network config, with
// the result as prevResult when ADD completed, as a runtime that caches
// results sends it.
func (r *rig) killAdd(id string, contNS *ns.NetNS, c map[string]any, frac float64) (trial, map[string]any) {
	GinkgoHelper()
	t := trial{addTime: r.addTime()}
	t.delay = time.Duration(frac * float64(t.addTime))
	p := r.start(testutil.Call{Command: "ADD", ContainerID: id, Netns: contNS.Path(), IfName: ifName, Stdin: marshal(c)})
	out, killed, ran, err := p.KillGroupAfter(t.delay)
	Expect(err).NotTo(HaveOccurred())
	if killed {
		return t, c
	}
	t.completed = true
	if out.Err != nil {
		// An ADD that ran to its end must succeed: a failure here is a
		// leftover of an earlier trial in the way, or a bug.
		t.addErr = fmt.Sprintf("ADD failed: %s %s", out.Err.Error(), out.Stderr)
		return t, c
	}
	r.samples = append(r.samples, ran)
	return t, with(c, "prevResult", json.RawMessage(out.Stdout))
}

// leftovers lists what of attachment id remains: links in the stand-in
// host beyond the baseline, links in contNS besides lo (contNS nil: not
// checked), netfilter rules that differ from the baseline, and files in
// the data dir that reserve an address or name id.
func (r *rig) leftovers(id string, contNS *ns.NetNS) []string {
	GinkgoHelper()
	var out []string
	if got := linkNames(r.hostNS); !slices.Equal(got, r.hostLinks) {
		out = append(out, fmt.Sprintf("host links %v, want %v", got, r.hostLinks))
	}
	if contNS != nil {
		if got := linkNames(contNS); !slices.Equal(got, []string{"lo"}) {
			out = append(out, fmt.Sprintf("container links %v, want [lo]", got))
		}
	}
	if got := r.ruleDump(); got != r.rules {
		out = append(out, "netfilter rules differ from the baseline:\n"+lineDiff(r.rules, got))
	}
	out = append(out, dataLeftovers(r.dataDir, id)...)
	return out
}

// dataLeftovers lists files under dataDir that reserve an address (a file
// named for one: the network only ever holds the trial's attachment) or
// whose name or content holds id: an index entry, a temp file, a state
// file.
func dataLeftovers(dataDir, id string) []string {
	GinkgoHelper()
	var out []string
	for _, rel := range testutil.Reservations(dataDir) {
		out = append(out, "reservation "+rel)
	}
	err := filepath.WalkDir(dataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dataDir, path) // path is under dataDir
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(rel, id) || bytes.Contains(data, []byte(id)) {
			shown := fmt.Sprintf("%q", data)
			if len(data) > 200 {
				shown = fmt.Sprintf("(%d bytes)", len(data))
			}
			out = append(out, fmt.Sprintf("file naming the attachment: %s %s", rel, shown))
		}
		return nil
	})
	Expect(err).NotTo(HaveOccurred())
	return out
}

// linkNames lists n's links, sorted.
func linkNames(n *ns.NetNS) []string {
	GinkgoHelper()
	h, err := n.Handle()
	Expect(err).NotTo(HaveOccurred())
	defer h.Close()
	links, err := h.LinkList()
	Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, l := range links {
		names = append(names, l.Attrs().Name)
	}
	slices.Sort(names)
	return names
}

// counters matches packet and byte counts as iptables-save and nft print
// them: traffic the kernel itself sends (IPv6 router solicitations) moves
// them.
var counters = regexp.MustCompile(`\[\d+:\d+\]|packets \d+ bytes \d+`)

// ruleDump is the stand-in host's netfilter state as nft prints it, and, when
// iptables is the legacy (x_tables) kind that nft cannot see, as
// iptables-save and ip6tables-save print it; without comments and counters.
func (r *rig) ruleDump() string {
	GinkgoHelper()
	return r.rulesText(!iptablesIsNFT())
}

// rulesText is nft's view, and with withIPTables also iptables-save's and
// ip6tables-save's, without comment lines and counters.
func (r *rig) rulesText(withIPTables bool) string {
	GinkgoHelper()
	dumps := [][]string{{"nft", "list", "ruleset"}}
	if withIPTables {
		dumps = append(dumps, []string{"iptables-save"}, []string{"ip6tables-save"})
	}
	var b strings.Builder
	for _, argv := range dumps {
		for _, l := range strings.Split(testutil.NetfilterOutput(r.hostNS, argv...), "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "#") || strings.TrimSpace(l) == "" {
				continue
			}
			b.WriteString(counters.ReplaceAllString(l, "0") + "\n")
		}
	}
	return b.String()
}

// iptablesIsNFT reports whether iptables here is iptables-nft, whose rules
// live in nf_tables and so show in `nft list ruleset`.
var iptablesIsNFT = sync.OnceValue(func() bool {
	out, err := exec.Command("iptables", "-V").Output()
	return err == nil && strings.Contains(string(out), "nf_tables")
})

// lineDiff lists the lines only in want (-) and only in got (+).
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for _, l := range w {
		if !slices.Contains(g, l) {
			b.WriteString("  - " + l + "\n")
		}
	}
	for _, l := range g {
		if !slices.Contains(w, l) {
			b.WriteString("  + " + l + "\n")
		}
	}
	return b.String()
}

// repair puts the rig back to its baseline after a leak, so the next
// trials count on their own: GC that keeps nothing, the attachment's links
// deleted, the network folder removed. Only the test's own namespaces and
// temp folder are touched.
func (r *rig) repair(contNS *ns.NetNS) {
	GinkgoHelper()
	_ = r.exec(testutil.Call{Command: "GC", Stdin: marshal(with(r.p.conf(r.dataDir, "iptables"), "cni.dev/valid-attachments", []any{}))})
	for _, n := range []*ns.NetNS{contNS, r.hostNS} {
		if n == nil {
			continue
		}
		h, err := n.Handle()
		Expect(err).NotTo(HaveOccurred())
		links, err := h.LinkList()
		Expect(err).NotTo(HaveOccurred())
		for _, l := range links {
			name := l.Attrs().Name
			if name != "lo" && (n == contNS || !slices.Contains(r.hostLinks, name)) {
				_ = h.LinkDel(l) // best effort: the checks below say what stayed
			}
		}
		h.Close()
	}
	Expect(os.RemoveAll(filepath.Join(r.dataDir, r.p.network))).To(Succeed())
	Expect(r.leftovers("no container has this id", contNS)).To(BeEmpty(), "the rig could not be repaired")
}

// fractions are n kill moments, as fractions of an unkilled ADD's
// duration, spread uniformly from 0 to 1.25 and shuffled, so some kills
// land before the plugin runs and some after it finished.
func fractions(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = 1.25 * float64(i) / float64(max(n-1, 1))
	}
	mrand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// tally counts trials and reports them.
type tally struct {
	name                     string
	trials, completed, leaks int
	minADD, maxADD           time.Duration // range of the ADD estimate used
}

func (t *tally) add(id string, tr trial) {
	t.trials++
	if tr.completed {
		t.completed++
	}
	if t.minADD == 0 || tr.addTime < t.minADD {
		t.minADD = tr.addTime
	}
	t.maxADD = max(t.maxADD, tr.addTime)
	if tr.addErr != "" {
		tr.leaks = append([]string{tr.addErr}, tr.leaks...)
	}
	if len(tr.leaks) > 0 {
		t.leaks++
		GinkgoWriter.Printf("LEAK %s trial %s (kill after %v, ADD takes about %v, ADD completed %v):\n  %s\n",
			t.name, id, tr.delay, tr.addTime, tr.completed, strings.Join(tr.leaks, "\n  "))
	}
}

func (t *tally) report() {
	line := fmt.Sprintf("%s: %d trials, %d leaks (%d killed during ADD, %d ADDs finished first; kills spread over 0-1.25x an unkilled ADD, which took %v-%v)",
		t.name, t.trials, t.leaks, t.trials-t.completed, t.completed, t.minADD.Round(time.Millisecond), t.maxADD.Round(time.Millisecond))
	GinkgoWriter.Println(line)
	AddReportEntry(t.name, line)
	// Also on stdout, so the counts show in a plain `go test -v` log.
	fmt.Println(line)
}

// runDel runs delTrials kills of ADD, each followed by the runtime's DEL,
// reusing one container namespace (every DEL must empty it).
func (r *rig) runDel(contNS *ns.NetNS) *tally {
	r.measure(contNS)
	t := &tally{name: r.p.name + " kill+DEL"}
	for i, frac := range fractions(delTrials) {
		id := r.containerID("del", i)
		c := r.p.conf(r.dataDir, r.backend(i))
		tr, delConf := r.killAdd(id, contNS, c, frac)
		out := r.exec(testutil.Call{Command: "DEL", ContainerID: id, Netns: contNS.Path(), IfName: ifName, Stdin: marshal(delConf)})
		if out.Err != nil {
			tr.leaks = append(tr.leaks, fmt.Sprintf("DEL failed: %s %s", out.Err.Error(), out.Stderr))
		}
		tr.leaks = append(tr.leaks, r.leftovers(id, contNS)...)
		t.add(id, tr)
		if len(tr.leaks) > 0 || tr.addErr != "" {
			r.repair(contNS)
		}
	}
	return t
}

// runGC runs gcTrials kills of ADD, each followed by the removal of the
// container namespace (the runtime removes the pod's namespace, and the
// veth with it) and a GC whose cni.dev/valid-attachments is empty or absent
// (libcni's GC without a list): either way the attachment is not valid.
func (r *rig) runGC(measureNS *ns.NetNS) *tally {
	r.measure(measureNS)
	t := &tally{name: r.p.name + " kill+GC"}
	for i, frac := range fractions(gcTrials) {
		id := r.containerID("gc", i)
		c := r.p.conf(r.dataDir, r.backend(i))
		contNS, removeNS, err := testutil.CreateNS()
		Expect(err).NotTo(HaveOccurred())
		tr, _ := func() (trial, map[string]any) {
			defer removeNS() // also when killAdd fails the spec
			return r.killAdd(id, contNS, c, frac)
		}()
		gcConf := with(c, "cni.dev/valid-attachments", []any{})
		if i%2 == 1 {
			gcConf = with(c, "cni.dev/valid-attachments", nil)
		}
		out := r.exec(testutil.Call{Command: "GC", Stdin: marshal(gcConf)})
		if out.Err != nil {
			tr.leaks = append(tr.leaks, fmt.Sprintf("GC failed: %s %s", out.Err.Error(), out.Stderr))
		}
		r.awaitHostLinks()
		tr.leaks = append(tr.leaks, r.leftovers(id, nil)...)
		t.add(id, tr)
		if len(tr.leaks) > 0 || tr.addErr != "" {
			r.repair(nil)
		}
	}
	return t
}

var _ = Describe("SIGKILL of the whole plugin process group during ADD", func() {
	It("leaves nothing of the attachment after the runtime's DEL, or after a GC that does not list it (bridge and ptp, with host-local)", func() {
		// Four campaigns at once, each in namespaces and a data dir of its
		// own: the machine is mostly waiting on exec and the kernel, and the
		// plugins meet the contention a node sees. Namespaces and temp
		// folders are made here, on the spec's goroutine, which owns the
		// cleanup list.
		var campaigns []func() *tally
		for _, p := range plugins {
			dr, dNS := newRig(p), testutil.NewNS()
			gr, gNS := newRig(p), testutil.NewNS()
			campaigns = append(campaigns,
				func() *tally { return dr.runDel(dNS) },
				func() *tally { return gr.runGC(gNS) })
		}
		tallies := make([]*tally, len(campaigns))
		var wg sync.WaitGroup
		for i, run := range campaigns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer GinkgoRecover()
				tallies[i] = run()
			}()
		}
		wg.Wait()
		leaks := 0
		for _, t := range tallies {
			if t == nil {
				continue // that campaign failed the spec already
			}
			t.report()
			leaks += t.leaks
		}
		Expect(leaks).To(BeZero(), "see the LEAK lines above")
	})
})

// awaitHostLinks waits until the stand-in host's links are the baseline
// again or a deadline passes: the kernel deletes the veth of a removed
// namespace asynchronously (cleanup_net), so its host end goes some time
// after the namespace's last reference. What remains after the deadline is
// reported by leftovers.
func (r *rig) awaitHostLinks() {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && !slices.Equal(linkNames(r.hostNS), r.hostLinks) {
		time.Sleep(5 * time.Millisecond) // test-only poll of the kernel's async netns cleanup
	}
}
