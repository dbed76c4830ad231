package tuning_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/meta/tuning"
)

const (
	netName = "tuning-net"
	contIP  = "10.5.0.2/24"
	newMAC  = "02:11:22:33:44:55"
)

// prevFor is the result a main plugin would have printed for eth0 in
// contNS, in version ver.
func prevFor(ver string, contNS *ns.NetNS) []byte {
	GinkgoHelper()
	addr, err := netlink4(contIP)
	Expect(err).NotTo(HaveOccurred())
	idx := 1
	res := &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{
			{Name: "veth-h", Mac: "02:00:00:00:00:01"},
			{Name: "eth0", Mac: "02:00:00:00:00:02", Sandbox: contNS.Path()},
		},
		IPs: []*current.IPConfig{{Address: *addr, Interface: &idx}},
	}
	return testutil.PrintResult(res, ver)
}

func netlink4(s string) (*net.IPNet, error) {
	ipv, n, err := net.ParseCIDR(s)
	if err != nil {
		return nil, err
	}
	n.IP = ipv
	return n, nil
}

// conf is a tuning config of version ver with keys (JSON members, no
// braces) and prevResult prev (nil: none).
func conf(ver, dataDir, keys string, prev []byte) []byte {
	return testutil.JoinConf(fmt.Sprintf(`"cniVersion": %q, "name": %q, "type": "tuning", "dataDir": %q`, ver, netName, dataDir), keys, prev)
}

// linkState is eth0's tunable attributes in n, as text.
func linkState(n *ns.NetNS, name string) string {
	GinkgoHelper()
	l, err := ip.LinkByName(testutil.Handle(n), name)
	Expect(err).NotTo(HaveOccurred())
	a := l.Attrs()
	return fmt.Sprintf("mtu=%d mac=%s promisc=%d allmulti=%d txqlen=%d", a.MTU, a.HardwareAddr, a.Promisc, a.Allmulti, a.TxQLen)
}

func sysctlIn(n *ns.NetNS, p string) string {
	GinkgoHelper()
	var v string
	Expect(n.Do(func() (err error) {
		v, err = ip.GetSysctl(p)
		return err
	})).To(Succeed())
	return v
}

func setSysctlIn(n *ns.NetNS, p, v string) {
	GinkgoHelper()
	Expect(n.Do(func() error { return ip.SetSysctl(p, v) })).To(Succeed())
}

func files(dir string) []string {
	GinkgoHelper()
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// The keys every full spec configures: all link attributes and two
// sysctls, one through IFNAME.
const allKeys = `"mac": "` + newMAC + `", "mtu": 1400, "promisc": true, "allmulti": true, "txQLen": 42,
	"sysctl": {"net.ipv4.conf.IFNAME.arp_filter": "1", "net/ipv4/conf/all/arp_ignore": "2"}`

var _ = Describe("tuning", func() {
	var (
		hostNS, contNS *ns.NetNS
		dataDir        string
		allowlist      string
	)

	BeforeEach(func() {
		hostNS = testutil.NewNS()
		contNS = testutil.NewNS()
		dataDir = filepath.Join(GinkgoT().TempDir(), "tuning")
		allowlist = filepath.Join(GinkgoT().TempDir(), "allowlist.conf") // absent unless a spec writes it
		Expect(testutil.ConnectNS(
			testutil.VethEnd{NS: hostNS, Name: "veth-h"},
			testutil.VethEnd{NS: contNS, Name: "eth0", Addrs: []string{contIP}},
		)).To(Succeed())
	})

	run := func(hooks attach.Hooks, cmd string, n *ns.NetNS, stdin []byte) testutil.Output {
		GinkgoHelper()
		return testutil.RunIn(hostNS, tuning.New(tuning.Options{Hooks: hooks, Allowlist: allowlist}), testutil.NewCall(cmd, "ctr1", "eth0", n, stdin))
	}
	must := func(cmd string, n *ns.NetNS, stdin []byte) testutil.Output {
		GinkgoHelper()
		out := run(attach.Hooks{}, cmd, n, stdin)
		Expect(out.Err).To(BeNil(), "%s: %v", cmd, out.Err)
		return out
	}
	stateFile := func() string { return filepath.Join(dataDir, "ctr1_eth0.json") }

	DescribeTableSubtree("every spec version", func(ver string) {
		It("applies every key in the container only, CHECKs it, and DEL restores it, twice", func() {
			before := linkState(contNS, "eth0")
			hostBefore := []string{sysctlIn(hostNS, "net/ipv4/conf/all/arp_ignore"), sysctlIn(hostNS, "net/ipv4/conf/veth-h/arp_filter")}
			contBefore := []string{sysctlIn(contNS, "net/ipv4/conf/eth0/arp_filter"), sysctlIn(contNS, "net/ipv4/conf/all/arp_ignore")}
			Expect(contBefore).To(Equal([]string{"0", "0"}))
			prev := prevFor(ver, contNS)

			out := must("ADD", contNS, conf(ver, dataDir, allKeys, prev))
			Expect(linkState(contNS, "eth0")).To(Equal("mtu=1400 mac=" + newMAC + " promisc=1 allmulti=1 txqlen=42"))
			Expect(sysctlIn(contNS, "net/ipv4/conf/eth0/arp_filter")).To(Equal("1"))
			Expect(sysctlIn(contNS, "net/ipv4/conf/all/arp_ignore")).To(Equal("2"))
			Expect([]string{sysctlIn(hostNS, "net/ipv4/conf/all/arp_ignore"), sysctlIn(hostNS, "net/ipv4/conf/veth-h/arp_filter")}).To(Equal(hostBefore))
			Expect(stateFile()).To(BeAnExistingFile())

			res := testutil.ParseResult(ver, out.Stdout)
			if testutil.AtLeast(ver, "0.3.0") {
				Expect(res.Interfaces).To(HaveLen(2))
				Expect(res.Interfaces[1].Mac).To(Equal(newMAC))
				Expect(res.Interfaces[0].Mac).To(Equal("02:00:00:00:00:01"))
			}
			Expect(res.IPs).To(HaveLen(1))
			Expect(res.IPs[0].Address.String()).To(Equal(contIP))

			if testutil.AtLeast(ver, "0.4.0") {
				must("CHECK", contNS, conf(ver, dataDir, allKeys, out.Stdout))
			}
			must("DEL", contNS, conf(ver, dataDir, allKeys, nil))
			Expect(linkState(contNS, "eth0")).To(Equal(before))
			Expect([]string{sysctlIn(contNS, "net/ipv4/conf/eth0/arp_filter"), sysctlIn(contNS, "net/ipv4/conf/all/arp_ignore")}).To(Equal(contBefore))
			Expect(files(dataDir)).To(BeEmpty())
			must("DEL", contNS, conf(ver, dataDir, allKeys, nil))
		})
	}, testutil.VersionEntries())

	// A main plugin whose ADD answers again over a live attachment (Calico's)
	// lets tuning's ADD run again: what DEL restores must still be the
	// values from before the first ADD, and a repeated ADD that fails must
	// leave the live attachment tuned, its state file in place.
	It("keeps the values from before the first ADD through a repeated ADD, and a failed one, for DEL", func() {
		before := linkState(contNS, "eth0")
		contBefore := []string{sysctlIn(contNS, "net/ipv4/conf/eth0/arp_filter"), sysctlIn(contNS, "net/ipv4/conf/all/arp_ignore")}
		stdin := conf("1.1.0", dataDir, allKeys, prevFor("1.1.0", contNS))
		must("ADD", contNS, stdin)
		tuned := linkState(contNS, "eth0")
		Expect(tuned).NotTo(Equal(before))
		must("ADD", contNS, stdin)
		Expect(linkState(contNS, "eth0")).To(Equal(tuned))

		for _, step := range tuning.AddSteps {
			out := run(attach.Hooks{AfterStep: testutil.FailAfter(step, nil)}, "ADD", contNS, stdin)
			Expect(out.Err).NotTo(BeNil())
			Expect(linkState(contNS, "eth0")).To(Equal(tuned), "after a repeated ADD failing at %s", step)
			Expect(stateFile()).To(BeAnExistingFile(), "after a repeated ADD failing at %s", step)
		}

		must("DEL", contNS, conf("1.1.0", dataDir, allKeys, nil))
		Expect(linkState(contNS, "eth0")).To(Equal(before))
		Expect([]string{sysctlIn(contNS, "net/ipv4/conf/eth0/arp_filter"), sysctlIn(contNS, "net/ipv4/conf/all/arp_ignore")}).To(Equal(contBefore))
		Expect(files(dataDir)).To(BeEmpty())
	})

	It("answers ADD without a state file or a change when nothing is configured", func() {
		out := must("ADD", contNS, conf("1.1.0", dataDir, "", prevFor("1.1.0", contNS)))
		Expect(testutil.ParseResult("1.1.0", out.Stdout).Interfaces[1].Mac).To(Equal("02:00:00:00:00:02"))
		Expect(files(dataDir)).To(BeEmpty())
	})

	DescribeTable("CHECK fails on drift of a configured value",
		func(drift func(), what string) {
			out := must("ADD", contNS, conf("1.1.0", dataDir, allKeys, prevFor("1.1.0", contNS)))
			drift()
			res := run(attach.Hooks{}, "CHECK", contNS, conf("1.1.0", dataDir, allKeys, out.Stdout))
			Expect(res.Err).NotTo(BeNil())
			Expect(res.Err.Msg).To(ContainSubstring(what))
		},
		Entry("mtu", func() { linkSet(contNS, func(h linkSetter) error { return h.mtu(1500) }) }, "mtu"),
		Entry("mac", func() { linkSet(contNS, func(h linkSetter) error { return h.mac("02:00:00:00:00:09") }) }, "mac"),
		Entry("promisc", func() { linkSet(contNS, func(h linkSetter) error { return h.promisc(false) }) }, "promisc"),
		Entry("allmulti", func() { linkSet(contNS, func(h linkSetter) error { return h.allmulti(false) }) }, "allmulti"),
		Entry("txQLen", func() { linkSet(contNS, func(h linkSetter) error { return h.txqlen(1000) }) }, "txQLen"),
		Entry("a sysctl", func() { setSysctlIn(contNS, "net/ipv4/conf/all/arp_ignore", "0") }, "arp_ignore"),
		Entry("an IFNAME sysctl", func() { setSysctlIn(contNS, "net/ipv4/conf/eth0/arp_filter", "0") }, "IFNAME"),
	)

	It("DEL with the netns gone removes the state file", func() {
		gone, remove := testutil.NewRemovableNS()
		Expect(testutil.ConnectNS(testutil.VethEnd{NS: hostNS, Name: "veth-g"}, testutil.VethEnd{NS: gone, Name: "eth0"})).To(Succeed())
		must("ADD", gone, conf("1.1.0", dataDir, allKeys, prevFor("1.1.0", gone)))
		Expect(stateFile()).To(BeAnExistingFile())
		path := gone.Path()
		remove()
		out := testutil.RunIn(hostNS, tuning.New(tuning.Options{Allowlist: allowlist}),
			testutil.Call{Command: "DEL", ContainerID: "ctr1", IfName: "eth0", Netns: path, Stdin: conf("1.1.0", dataDir, allKeys, nil)})
		Expect(out.Err).To(BeNil())
		Expect(files(dataDir)).To(BeEmpty())
		out = testutil.RunIn(hostNS, tuning.New(tuning.Options{}),
			testutil.Call{Command: "DEL", ContainerID: "ctr1", IfName: "eth0", Stdin: conf("1.1.0", dataDir, allKeys, nil)})
		Expect(out.Err).To(BeNil())
	})

	// Issue 14, kills mid-ADD: tests/killadd found the temp file of the
	// state left after an ADD was SIGKILLed between writing and renaming it.
	It("DEL, and GC without the attachment, remove the temp state file a killed ADD left", func() {
		Expect(os.MkdirAll(dataDir, 0o700)).To(Succeed())
		must("ADD", contNS, conf("1.1.0", dataDir, allKeys, prevFor("1.1.0", contNS)))
		data, err := os.ReadFile(stateFile())
		Expect(err).NotTo(HaveOccurred())
		tmp := filepath.Join(dataDir, ".tmp-ctr1_eth0.json")
		Expect(os.WriteFile(tmp, data, 0o600)).To(Succeed())
		must("DEL", contNS, conf("1.1.0", dataDir, allKeys, nil))
		Expect(files(dataDir)).To(BeEmpty())

		// Killed before the rename: no state file, only the temp file.
		must("ADD", contNS, conf("1.1.0", dataDir, allKeys, prevFor("1.1.0", contNS)))
		Expect(os.Rename(stateFile(), tmp)).To(Succeed())
		must("DEL", contNS, conf("1.1.0", dataDir, allKeys, nil))
		Expect(files(dataDir)).To(BeEmpty())

		Expect(os.WriteFile(tmp, data, 0o600)).To(Succeed())
		gc := conf("1.1.0", dataDir, `"cni.dev/valid-attachments": []`, nil)
		out := testutil.RunIn(hostNS, tuning.New(tuning.Options{}), testutil.Call{Command: "GC", Stdin: gc})
		Expect(out.Err).To(BeNil())
		Expect(files(dataDir)).To(BeEmpty())
	})

	Describe("a failure after each step of ADD leaves nothing", func() {
		snap := func() []string {
			return append([]string{linkState(contNS, "eth0"),
				sysctlIn(contNS, "net/ipv4/conf/eth0/arp_filter"), sysctlIn(contNS, "net/ipv4/conf/all/arp_ignore")},
				files(dataDir)...)
		}
		DescribeTable("error", func(step string) {
			before := snap()
			out := run(attach.Hooks{AfterStep: testutil.FailAfter(step, nil)}, "ADD", contNS, conf("1.1.0", dataDir, allKeys, prevFor("1.1.0", contNS)))
			Expect(out.Err).NotTo(BeNil())
			Expect(out.Err.Msg).To(ContainSubstring(testutil.ErrInjected.Error()))
			Expect(snap()).To(Equal(before))
		}, testutil.StepEntries(tuning.AddSteps))
		DescribeTable("panic", func(step string) {
			before := snap()
			out := run(attach.Hooks{AfterStep: testutil.PanicAfter(step)}, "ADD", contNS, conf("1.1.0", dataDir, allKeys, prevFor("1.1.0", contNS)))
			testutil.ExpectCode(out, types.ErrInternal)
			Expect(snap()).To(Equal(before))
		}, testutil.StepEntries(tuning.AddSteps))
	})

	It("DEL restores everything and removes the state file with a config that no longer validates", func() {
		// A config edited between ADD and DEL must not keep the attachment
		// from being undone (issue 22): DEL needs only dataDir.
		snap := func() []string {
			return append([]string{linkState(contNS, "eth0"),
				sysctlIn(contNS, "net/ipv4/conf/eth0/arp_filter"), sysctlIn(contNS, "net/ipv4/conf/all/arp_ignore")},
				files(dataDir)...)
		}
		before := snap()
		must("ADD", contNS, conf("1.1.0", dataDir, allKeys, prevFor("1.1.0", contNS)))
		Expect(stateFile()).To(BeAnExistingFile())
		edited := conf("1.1.0", dataDir, `"mac": "nope", "mtu": -5, "sysctl": {"kernel.panic": "1"}`, prevFor("1.1.0", contNS))
		out := run(attach.Hooks{}, "ADD", contNS, edited)
		testutil.ExpectCode(out, types.ErrInvalidNetworkConfig, "ADD still refuses it")
		must("DEL", contNS, edited)
		Expect(stateFile()).NotTo(BeAnExistingFile())
		Expect(snap()).To(Equal(before))
		must("DEL", contNS, edited)
	})

	It("answers a panic inside the container namespace with error JSON and leaves nothing", func() {
		// The sysctl write runs in ns.Do, on a goroutine of its own: a
		// panic there ended the process with a stack trace, no answer and
		// the state file left behind (issue 22).
		before := append([]string{linkState(contNS, "eth0"),
			sysctlIn(contNS, "net/ipv4/conf/eth0/arp_filter"), sysctlIn(contNS, "net/ipv4/conf/all/arp_ignore")},
			files(dataDir)...)
		writes := 0
		plug := tuning.New(tuning.Options{Allowlist: allowlist, SetSysctl: func(p, v string) error {
			if writes++; writes == 2 {
				panic("injected in " + p)
			}
			return ip.SetSysctl(p, v)
		}})
		out := testutil.RunIn(hostNS, plug, testutil.Call{Command: "ADD", ContainerID: "ctr1", IfName: "eth0",
			Netns: contNS.Path(), Stdin: conf("1.1.0", dataDir, allKeys, prevFor("1.1.0", contNS))})
		testutil.ExpectCode(out, types.ErrInternal)
		Expect(out.Err.Msg).To(ContainSubstring("panic in netns " + contNS.Path() + ": injected in"))
		Expect(writes).To(Equal(2))
		Expect(stateFile()).NotTo(BeAnExistingFile())
		Expect(append([]string{linkState(contNS, "eth0"),
			sysctlIn(contNS, "net/ipv4/conf/eth0/arp_filter"), sysctlIn(contNS, "net/ipv4/conf/all/arp_ignore")},
			files(dataDir)...)).To(Equal(before))
	})

	Describe("the allowlist", func() {
		BeforeEach(func() {
			Expect(os.WriteFile(allowlist, []byte("^net\\.ipv4\\.conf\\.IFNAME\\.arp_filter$\n\n^net/ipv4/conf/all/arp_ignore$\n"), 0o644)).To(Succeed())
		})
		It("lets through what it matches", func() {
			must("ADD", contNS, conf("1.1.0", dataDir, allKeys, prevFor("1.1.0", contNS)))
			Expect(sysctlIn(contNS, "net/ipv4/conf/eth0/arp_filter")).To(Equal("1"))
		})
		It("refuses, with code 7 and before any change, a key it does not match", func() {
			before := linkState(contNS, "eth0")
			keys := allKeys + `, "args": {"cni": {"sysctl": {"net.ipv4.conf.all.arp_ignore": "1"}}}`
			out := run(attach.Hooks{}, "ADD", contNS, conf("1.1.0", dataDir, keys, prevFor("1.1.0", contNS)))
			testutil.ExpectCode(out, types.ErrInvalidNetworkConfig)
			Expect(out.Err.Msg).To(ContainSubstring(`"net.ipv4.conf.all.arp_ignore" matches no line of the allowlist ` + allowlist))
			Expect(linkState(contNS, "eth0")).To(Equal(before))
			Expect(sysctlIn(contNS, "net/ipv4/conf/eth0/arp_filter")).To(Equal("0"))
			Expect(files(dataDir)).To(BeEmpty())
		})
	})

	DescribeTable("refuses bad input with its code and changes nothing",
		func(code int, cmd string, mutate func(c *testutil.Call), msg string) {
			before := linkState(contNS, "eth0")
			c := testutil.Call{Command: cmd, ContainerID: "ctr1", IfName: "eth0", Netns: contNS.Path(),
				Stdin: conf("1.1.0", dataDir, allKeys, prevFor("1.1.0", contNS))}
			mutate(&c)
			out := testutil.RunIn(hostNS, tuning.New(tuning.Options{Allowlist: allowlist}), c)
			testutil.ExpectCode(out, code)
			Expect(out.Err.Msg + out.Err.Details).To(ContainSubstring(msg))
			Expect(linkState(contNS, "eth0")).To(Equal(before))
			Expect(files(dataDir)).To(BeEmpty())
		},
		Entry("not JSON (6)", 6, "ADD", func(c *testutil.Call) { c.Stdin = []byte("{") }, ""),
		Entry("prevResult not decodable (6)", 6, "ADD", func(c *testutil.Call) {
			c.Stdin = conf("1.1.0", dataDir, allKeys, []byte(`{"cniVersion": "1.1.0", "ips": 7}`))
		}, "prevResult"),
		Entry("CNI_IFNAME missing (4)", 4, "ADD", func(c *testutil.Call) { c.IfName = "" }, "CNI_IFNAME"),
		Entry("incompatible version (1)", 1, "ADD", func(c *testutil.Call) {
			c.Stdin = []byte(strings.Replace(string(c.Stdin), `"cniVersion": "1.1.0", "name"`, `"cniVersion": "9.0.0", "name"`, 1))
		}, ""),
		Entry("no prevResult (7)", 7, "ADD", func(c *testutil.Call) { c.Stdin = conf("1.1.0", dataDir, allKeys, nil) }, "prevResult: missing"),
		Entry("a sysctl outside /proc/sys/net (7)", 7, "ADD", func(c *testutil.Call) {
			c.Stdin = conf("1.1.0", dataDir, `"sysctl": {"net/../kernel/domainname": "x"}`, prevFor("1.1.0", contNS))
		}, "net/../kernel/domainname"),
		Entry("a sysctl that does not exist (7)", 7, "ADD", func(c *testutil.Call) {
			c.Stdin = conf("1.1.0", dataDir, `"mtu": 1300, "sysctl": {"net.ipv4.conf.IFNAME.no_such": "1"}`, prevFor("1.1.0", contNS))
		}, "net.ipv4.conf.IFNAME.no_such"),
		Entry("a bad MAC (7)", 7, "ADD", func(c *testutil.Call) { c.Args = "MAC=nope" }, "mac"),
		Entry("CHECK without prevResult (7)", 7, "CHECK", func(c *testutil.Call) { c.Stdin = conf("1.1.0", dataDir, allKeys, nil) }, "prevResult"),
	)

	It("DEL writes no sysctl of a tampered state file outside /proc/sys/net", func() {
		// The state file is input too: a key climbing out of /proc/sys/net
		// must not become a write anywhere else (issue 22, mutation).
		victim := filepath.Join(GinkgoT().TempDir(), "victim")
		key := "net/../../.." + victim
		Expect(filepath.Join("/proc/sys", key)).To(Equal(victim))
		Expect(os.MkdirAll(dataDir, 0o700)).To(Succeed())
		st, err := json.Marshal(map[string]any{"sysctl": map[string]string{
			key: "written", "net/ipv4/conf/all/arp_ignore": "1"}})
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(stateFile(), st, 0o600)).To(Succeed())
		must("DEL", contNS, conf("1.1.0", dataDir, "", nil))
		Expect(victim).NotTo(BeAnExistingFile())
		Expect(sysctlIn(contNS, "net/ipv4/conf/all/arp_ignore")).To(Equal("1"), "the valid key is restored")
		Expect(files(dataDir)).To(BeEmpty())
	})

	It("DEL keeps the state file when a restore fails, for the retry", func() {
		Expect(os.MkdirAll(dataDir, 0o700)).To(Succeed())
		bad := `{"sysctl": {"net/ipv4/conf/eth0/arp_filter": "not a number"}}`
		Expect(os.WriteFile(stateFile(), []byte(bad), 0o600)).To(Succeed())
		out := run(attach.Hooks{}, "DEL", contNS, conf("1.1.0", dataDir, "", nil))
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Msg).To(ContainSubstring("arp_filter"))
		Expect(files(dataDir)).To(ConsistOf("ctr1_eth0.json"))
		// Once the restore can succeed, the retry removes it.
		Expect(os.WriteFile(stateFile(), []byte(`{"sysctl": {"net/ipv4/conf/eth0/arp_filter": "0"}}`), 0o600)).To(Succeed())
		must("DEL", contNS, conf("1.1.0", dataDir, "", nil))
		Expect(files(dataDir)).To(BeEmpty())
	})

	It("DEL restores what an upstream ADD recorded, in upstream's file format", func() {
		before := linkState(contNS, "eth0")
		linkSet(contNS, func(h linkSetter) error { return h.mtu(1300) })
		linkSet(contNS, func(h linkSetter) error { return h.promisc(true) })
		linkSet(contNS, func(h linkSetter) error { return h.txqlen(5) })
		Expect(os.MkdirAll(dataDir, 0o700)).To(Succeed())
		up := fmt.Sprintf(`{
 "mac": %q,
 "promisc": false,
 "mtu": 1500,
 "txQLen": %s
}`, strings.Fields(before)[1][4:], strings.TrimPrefix(strings.Fields(before)[4], "txqlen="))
		Expect(os.WriteFile(stateFile(), []byte(up), 0o600)).To(Succeed())
		must("DEL", contNS, conf("1.1.0", dataDir, "", nil))
		Expect(linkState(contNS, "eth0")).To(Equal(before))
		Expect(files(dataDir)).To(BeEmpty())
	})

	It("GC removes this network's state files of attachments not listed, and nothing else", func() {
		must("ADD", contNS, conf("1.1.0", dataDir, allKeys, prevFor("1.1.0", contNS)))
		Expect(os.WriteFile(filepath.Join(dataDir, "other_eth0.json"), []byte(`{"mtu": 1500, "network": "`+netName+`"}`), 0o600)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dataDir, "upstream_eth0.json"), []byte(`{"mtu": 1500}`), 0o600)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dataDir, "othernet_eth0.json"), []byte(`{"mtu": 1500, "network": "elsewhere"}`), 0o600)).To(Succeed())
		gc := conf("1.1.0", dataDir, `"cni.dev/valid-attachments": [{"containerID": "ctr1", "ifname": "eth0"}]`, nil)
		out := testutil.RunIn(hostNS, tuning.New(tuning.Options{}), testutil.Call{Command: "GC", Stdin: gc})
		Expect(out.Err).To(BeNil())
		Expect(files(dataDir)).To(ConsistOf("ctr1_eth0.json", "upstream_eth0.json", "othernet_eth0.json"))

		gc = conf("1.1.0", dataDir, `"cni.dev/valid-attachments": []`, nil)
		out = testutil.RunIn(hostNS, tuning.New(tuning.Options{}), testutil.Call{Command: "GC", Stdin: gc})
		Expect(out.Err).To(BeNil())
		Expect(files(dataDir)).To(ConsistOf("upstream_eth0.json", "othernet_eth0.json"))
	})

	It("answers STATUS", func() {
		out := testutil.RunIn(hostNS, tuning.New(tuning.Options{}), testutil.Call{Command: "STATUS", Stdin: conf("1.1.0", dataDir, "", nil)})
		Expect(out.Err).To(BeNil())
	})
})
