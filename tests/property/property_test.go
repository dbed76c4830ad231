package property_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/kernelfeature"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

const (
	// The container IDs are long enough not to turn up by chance in a hash
	// (see noFileNames).
	warmID, oneID, twoID, threeID = "prop-ctr-warm", "prop-ctr-one", "prop-ctr-two", "prop-ctr-three"

	network = "propnet"
	version = "1.1.0"
)

// pcase is one config of the table: a main plugin and the plugins chained
// behind it. In the plugin objects, $DATA, $TUNING and $SOCK stand for
// host-local's dataDir, tuning's dataDir and the dhcp daemon's socket.
type pcase struct {
	main  string
	metas []string
	needs []kernelfeature.Feature
	// setup prepares the stand-in host (a master link, a dhcp server).
	setup func(e *env)
	// prepare changes a fresh container before ADD (loopback: lo down, so
	// that its ADD changes something).
	prepare func(contNS *ns.NetNS)
	// noNetfilter leaves the ruleset out of the snapshots, for plugins
	// that never touch netfilter (its dumps are most of a snapshot's cost).
	noNetfilter bool
	// device is a host link the plugin moves into the container: a
	// container that dies takes it along (the kernel destroys a virtual
	// device with its namespace), so a GC after that cannot give it back.
	device string
}

// env is one spec's stand-in host and data folders.
type env struct {
	hostNS                      *ns.NetNS
	dataDir, tuningDir, dhcpDir string
	sock                        string
	cacheDir                    string
	// netfilter: the snapshots include the host's ruleset (see pcase).
	netfilter bool
}

func (e *env) dirs() []string { return []string{e.dataDir, e.tuningDir, e.dhcpDir} }

func (e *env) expand(s string) string {
	return strings.NewReplacer("$DATA", e.dataDir, "$TUNING", e.tuningDir, "$SOCK", e.sock).Replace(s)
}

func (e *env) conflist(plugins ...string) *libcni.NetworkConfigList {
	GinkgoHelper()
	raw := fmt.Sprintf(`{"cniVersion": %q, "name": %q, "plugins": [%s]}`, version, network, e.expand(strings.Join(plugins, ",")))
	list, err := libcni.ConfListFromBytes([]byte(raw))
	Expect(err).NotTo(HaveOccurred(), raw)
	return list
}

// cni is a runtime with its own cache. GC gets a fresh one each time (see
// gc), so the plugins' GC is what runs, not libcni's DEL of its cache.
func (e *env) cni() *libcni.CNIConfig {
	return libcni.NewCNIConfigWithCacheDir([]string{testutil.BinDir()}, e.cacheDir, nil)
}

func rt(id string, contNS *ns.NetNS) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: id, NetNS: contNS.Path(), IfName: "eth0"}
}

func (e *env) add(list *libcni.NetworkConfigList, id string, contNS *ns.NetNS) []byte {
	GinkgoHelper()
	var res types.Result
	Expect(e.hostNS.Do(func() (err error) {
		res, err = e.cni().AddNetworkList(context.Background(), list, rt(id, contNS))
		return err
	})).To(Succeed(), "ADD %s", id)
	b, err := json.Marshal(res)
	Expect(err).NotTo(HaveOccurred())
	return b
}

func (e *env) del(list *libcni.NetworkConfigList, id string, contNS *ns.NetNS) {
	GinkgoHelper()
	Expect(e.hostNS.Do(func() error {
		return e.cni().DelNetworkList(context.Background(), list, rt(id, contNS))
	})).To(Succeed(), "DEL %s", id)
}

// gc runs libcni's GC with valid as the attachments still in use, from a
// runtime that lost its cache: only the plugins' own GC can release.
func (e *env) gc(list *libcni.NetworkConfigList, valid ...string) {
	GinkgoHelper()
	args := &libcni.GCArgs{ValidAttachments: []types.GCAttachment{}}
	for _, id := range valid {
		args.ValidAttachments = append(args.ValidAttachments, types.GCAttachment{ContainerID: id, IfName: "eth0"})
	}
	cni := libcni.NewCNIConfigWithCacheDir([]string{testutil.BinDir()}, GinkgoT().TempDir(), nil)
	Expect(e.hostNS.Do(func() error { return cni.GCNetworkList(context.Background(), list, args) })).To(Succeed(), "GC")
}

// meta runs one chained plugin (its JSON object) by itself, as the runtime
// would inside a list: name, cniVersion and prevResult added.
func (e *env) meta(cmd, plugin, id string, contNS *ns.NetNS, prev []byte, valid []string) []byte {
	GinkgoHelper()
	var conf map[string]any
	Expect(json.Unmarshal([]byte(e.expand(plugin)), &conf)).To(Succeed())
	conf["name"], conf["cniVersion"] = network, version
	if prev != nil {
		conf["prevResult"] = json.RawMessage(prev)
	}
	if valid != nil {
		atts := []map[string]string{}
		for _, v := range valid {
			atts = append(atts, map[string]string{"containerID": v, "ifname": "eth0"})
		}
		conf["cni.dev/valid-attachments"] = atts
	}
	stdin, err := json.Marshal(conf)
	Expect(err).NotTo(HaveOccurred())
	c := testutil.Call{Command: cmd, Stdin: stdin}
	if cmd != "GC" {
		c.ContainerID, c.Netns, c.IfName = id, contNS.Path(), "eth0"
	}
	out := testutil.ExecIn(e.hostNS, conf["type"].(string), c)
	Expect(out.Err).To(BeNil(), "%s %s: %s", cmd, conf["type"], out.Stderr)
	return out.Stdout
}

func (e *env) snap(contNS *ns.NetNS) testutil.NodeSnapshot {
	GinkgoHelper()
	settle(e.hostNS)
	if contNS != nil {
		settle(contNS)
	}
	s := testutil.TakeNodeSnapshot(testutil.NodeOpts{Host: e.hostNS, Cont: contNS, Sysctls: true, NoDefaultQdiscs: true,
		Netfilter: e.netfilter, WithoutSharedBase: true, Dirs: e.dirs(), NameOnly: volatileFile.MatchString})
	return s.Without(func(l string) bool { return hostLocalIndex.MatchString(l) || l == l3mdevRule })
}

// settle waits (up to 5 s) until no IPv6 address on a link with carrier
// is tentative: the kernel finishes an address (and adds its local route)
// from a work queue after the link gets carrier, so a snapshot taken right
// after ADD could miss what is about to appear. A link without carrier
// keeps its addresses tentative; it is not waited for.
func settle(n *ns.NetNS) {
	GinkgoHelper()
	h := testutil.Handle(n)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		addrs, err := ip.AddrList(h, nil, netlink.FAMILY_V6)
		Expect(err).NotTo(HaveOccurred())
		busy := false
		for _, a := range addrs {
			if a.Flags&unix.IFA_F_TENTATIVE == 0 {
				continue
			}
			if l, err := h.LinkByIndex(a.LinkIndex); err == nil && l.Attrs().RawFlags&unix.IFF_RUNNING != 0 {
				busy = true
			}
		}
		if !busy {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// l3mdevRule is the rule "1000: from all lookup [l3mdev-table]" (netlink
// prints it as table 0): the kernel adds it when the first VRF of a
// namespace is made and never removes it, whatever vrf's DEL does.
const l3mdevRule = "container rule: ip rule 1000: from all to all table 0"

// expectSame fails the spec with a readable diff when after differs from
// before.
func expectSame(before, after testutil.NodeSnapshot, what string) {
	GinkgoHelper()
	if d := before.Diff(after); d != "" {
		Fail(fmt.Sprintf("%s: the node is not as it was (- before, + after):\n%s", what, d))
	}
}

// noFileNames fails the spec if a file under the data dirs still holds id.
func (e *env) noFileNames(id string) {
	GinkgoHelper()
	for _, d := range e.dirs() {
		err := filepath.WalkDir(d, func(p string, de os.DirEntry, err error) error {
			if err != nil || de.IsDir() || de.Type()&os.ModeSocket != 0 {
				return err
			}
			b, err := os.ReadFile(p)
			if err == nil && strings.Contains(string(b), id) {
				return fmt.Errorf("%s still names %s: %q", p, id, b)
			}
			return err
		})
		if !os.IsNotExist(err) {
			Expect(err).NotTo(HaveOccurred())
		}
	}
}

func hostOnly(s testutil.NodeSnapshot) testutil.NodeSnapshot {
	return s.Without(func(l string) bool { return strings.HasPrefix(l, "container ") })
}

// without drops every line naming word from the host's sections but its
// policy rules.
func without(s testutil.NodeSnapshot, word string) testutil.NodeSnapshot {
	if word == "" {
		return s
	}
	return s.Without(func(l string) bool {
		return strings.HasPrefix(l, "host ") && !strings.HasPrefix(l, "host rule: ") && strings.Contains(l, word)
	})
}

func newEnv(c pcase) *env {
	GinkgoHelper()
	// Short: a unix socket path has 108 bytes at most.
	dir, err := os.MkdirTemp("", "prop")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dir)
	e := &env{
		hostNS:    testutil.NewNS(),
		dataDir:   filepath.Join(dir, "ipam"),
		tuningDir: filepath.Join(dir, "tuning"),
		dhcpDir:   filepath.Join(dir, "dhcp"),
		sock:      filepath.Join(dir, "d.sock"),
		cacheDir:  filepath.Join(dir, "cache"),
		netfilter: !c.noNetfilter,
	}
	if c.setup != nil {
		c.setup(e)
	}
	return e
}

func newCont(c pcase) *ns.NetNS {
	GinkgoHelper()
	n := testutil.NewNS()
	if c.prepare != nil {
		c.prepare(n)
	}
	return n
}

func propertySpec(c pcase) {
	kernelfeature.Require(c.needs...)
	e := newEnv(c)
	list := e.conflist(append([]string{c.main}, c.metas...)...)

	By("a first attachment's ADD and DEL leave only the node's shared state")
	pristine := e.snap(nil)
	warm := newCont(c)
	e.add(list, warmID, warm)
	e.del(list, warmID, warm)
	expectOnlyShared(pristine, e.snap(nil))
	e.noFileNames(warmID)

	By("ADD, a GC that lists it, DEL, DEL")
	contNS := newCont(c)
	before := e.snap(contNS)
	e.add(list, oneID, contNS)
	added := e.snap(contNS)
	Expect(before.Diff(added)).NotTo(BeEmpty(), "ADD changed nothing the snapshot sees")
	e.gc(list, oneID)
	expectSame(added, e.snap(contNS), "ADD then GC listing it")
	e.del(list, oneID, contNS)
	e.del(list, oneID, contNS) // DEL is idempotent: the second changes nothing
	expectSame(before, e.snap(contNS), "ADD then DEL (twice)")
	e.noFileNames(oneID)

	By("ADD, the container dies, a GC that does not list it")
	dying, remove := testutil.NewRemovableNS()
	if c.prepare != nil {
		c.prepare(dying)
	}
	before = e.snap(nil)
	e.add(list, twoID, dying)
	remove()
	e.gc(list)
	// The namespace ends once nothing holds it (the dhcp daemon does, for
	// its lease, until GC releases it), and the kernel then removes its
	// links from a work queue: what they did to the host (a macvlan's
	// master in promiscuous mode) goes a moment after GC returns.
	Eventually(func() string { return without(before, c.device).Diff(without(e.snap(nil), c.device)) }).
		WithTimeout(10*time.Second).WithPolling(50*time.Millisecond).
		Should(BeEmpty(), "ADD then GC without it: the node is not as it was (- before, + after)")
	e.noFileNames(twoID)

	if len(c.metas) == 0 {
		return
	}
	By("the chained plugins' own ADD, DEL and GC leave the main attachment as it was")
	main := e.conflist(c.main)
	contNS = newCont(c)
	before = e.snap(contNS)
	prev := e.add(main, threeID, contNS)
	mainOnly := e.snap(contNS)
	chain := func() []byte {
		res := prev
		for _, m := range c.metas {
			res = e.meta("ADD", m, threeID, contNS, res, nil)
		}
		return res
	}
	res := chain()
	withMetas := e.snap(contNS)
	Expect(mainOnly.Diff(withMetas)).NotTo(BeEmpty(), "the chained plugins' ADD changed nothing the snapshot sees")
	for i := len(c.metas) - 1; i >= 0; i-- {
		e.meta("DEL", c.metas[i], threeID, contNS, res, nil)
	}
	expectSame(mainOnly, e.snap(contNS), "chained plugins' ADD then DEL")

	res = chain()
	withMetas = e.snap(contNS)
	for _, m := range c.metas {
		e.meta("GC", m, "", nil, nil, []string{threeID})
	}
	expectSame(withMetas, e.snap(contNS), "chained plugins' ADD then GC listing it")
	for _, m := range c.metas {
		e.meta("GC", m, "", nil, nil, []string{})
	}
	// A meta plugin's GC does not know the container's namespace: what it
	// changed inside (tuning's sysctls) stays until the container goes.
	expectSame(hostOnly(mainOnly), hostOnly(e.snap(contNS)), "chained plugins' ADD then GC without it")
	e.del(list, threeID, contNS) // the whole list: what sbr did inside goes with its DEL
	expectSame(before, e.snap(contNS), "the list's DEL after its chained plugins' GC")
	_ = res
}
