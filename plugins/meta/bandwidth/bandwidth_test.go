package bandwidth_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/meta/bandwidth"
)

const (
	netName  = "bw-net"
	hostAddr = "10.8.0.1"
	contAddr = "10.8.0.2"
	// 4 Mbit/s each way, with a 50 kB burst: 1 MB takes about 2 s.
	limits = `"ingressRate": 4000000, "ingressBurst": 400000, "egressRate": 4000000, "egressBurst": 400000`
)

var bwVersions = []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}

// newPair makes a spec's host and container netns, joined by a veth:
// veth-h (hostAddr) in the host, eth0 (contAddr) in the container.
func newPair() (hostNS, contNS *ns.NetNS) {
	GinkgoHelper()
	hostNS, contNS = testutil.NewNS(), testutil.NewNS()
	Expect(testutil.ConnectNS(
		testutil.VethEnd{NS: hostNS, Name: "veth-h", Addrs: []string{hostAddr + "/24"}},
		testutil.VethEnd{NS: contNS, Name: "eth0", Addrs: []string{contAddr + "/24"}},
	)).To(Succeed())
	return hostNS, contNS
}

// callCtr1 runs bandwidth with hooks in hostNS for container ctr1's eth0
// in contNS.
func callCtr1(hostNS, contNS *ns.NetNS, hooks attach.Hooks, cmd string, stdin []byte) testutil.Output {
	GinkgoHelper()
	return testutil.RunIn(hostNS, bandwidth.New(hooks), testutil.Call{Command: cmd, ContainerID: "ctr1", IfName: "eth0", Netns: contNS.Path(), Stdin: stdin})
}

// mustCtr1 is callCtr1 without hooks, which must succeed.
func mustCtr1(hostNS, contNS *ns.NetNS, cmd string, stdin []byte) testutil.Output {
	GinkgoHelper()
	out := callCtr1(hostNS, contNS, attach.Hooks{}, cmd, stdin)
	Expect(out.Err).To(BeNil(), "%s: %v", cmd, out.Err)
	return out
}

// pair is a spec's newPair, made again for each spec by usePair's
// BeforeEach, with bandwidth run for container ctr1's eth0 in it.
type pair struct{ hostNS, contNS *ns.NetNS }

// usePair registers, in the container node it is called in, the
// BeforeEach that gives the returned pair fresh namespaces for each spec.
func usePair() *pair {
	p := &pair{}
	BeforeEach(func() { p.hostNS, p.contNS = newPair() })
	return p
}

// run is callCtr1 in p.
func (p *pair) run(hooks attach.Hooks, cmd string, stdin []byte) testutil.Output {
	GinkgoHelper()
	return callCtr1(p.hostNS, p.contNS, hooks, cmd, stdin)
}

// must is mustCtr1 in p.
func (p *pair) must(cmd string, stdin []byte) testutil.Output {
	GinkgoHelper()
	return mustCtr1(p.hostNS, p.contNS, cmd, stdin)
}

func prevFor(ver string, contNS *ns.NetNS, hostIf string) []byte {
	GinkgoHelper()
	idx := 1
	res := &current.Result{CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{{Name: hostIf}, {Name: "eth0", Sandbox: contNS.Path()}},
		IPs:        []*current.IPConfig{{Address: net.IPNet{IP: net.ParseIP(contAddr).To4(), Mask: net.CIDRMask(24, 32)}, Interface: &idx}}}
	r, err := res.GetAsVersion(ver)
	Expect(err).NotTo(HaveOccurred())
	b, err := json.Marshal(r)
	Expect(err).NotTo(HaveOccurred())
	return b
}

// replaceTbf changes the root tbf of link name in n to rate (B/s); a
// buffer or limit of 0 keeps the one there.
func replaceTbf(n *ns.NetNS, name string, rate uint64, buffer, limit uint32) {
	GinkgoHelper()
	t := rootTbf(n, name)
	t.Rate = rate
	if buffer != 0 {
		t.Buffer = buffer
	}
	if limit != 0 {
		t.Limit = limit
	}
	Expect(testutil.Handle(n).QdiscReplace(t)).To(Succeed())
	// (Not the whole qdisc: its statistics move as packets pass.)
	got := rootTbf(n, name)
	Expect([]uint64{got.Rate, uint64(got.Buffer), uint64(got.Limit)}).To(Equal([]uint64{t.Rate, uint64(t.Buffer), uint64(t.Limit)}))
}

// rootTbf is the root tbf of link name in n, read over netlink.
func rootTbf(n *ns.NetNS, name string) *netlink.Tbf {
	GinkgoHelper()
	for _, q := range qdiscsOf(n, name) {
		if t, ok := q.(*netlink.Tbf); ok && t.Parent == netlink.HANDLE_ROOT {
			return t
		}
	}
	Fail("no root tbf on " + name)
	return nil
}

func conf(ver, keys string, prev []byte) []byte {
	s := fmt.Sprintf(`{"cniVersion": %q, "name": %q, "type": "bandwidth"`, ver, netName)
	if keys != "" {
		s += ", " + keys
	}
	if prev != nil {
		s += `, "prevResult": ` + string(prev)
	}
	return []byte(s + "}")
}

func tc(n *ns.NetNS, args ...string) string {
	GinkgoHelper()
	out, err := exec.Command("tc", append([]string{"-n", filepath.Base(n.Path())}, args...)...).CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "%s", out)
	return string(out)
}

// transfer sends size bytes over TCP from a socket in from to a listener
// on addr in to, and returns how long it took until the receiver had them.
func transfer(from, to *ns.NetNS, addr string, size int) time.Duration {
	GinkgoHelper()
	var ln net.Listener
	Expect(to.Do(func() (err error) {
		ln, err = net.Listen("tcp", net.JoinHostPort(addr, "0"))
		return err
	})).To(Succeed())
	defer ln.Close()
	got := make(chan int64, 1)
	go func() {
		defer GinkgoRecover()
		c, err := ln.Accept()
		if err != nil {
			got <- -1
			return
		}
		defer c.Close()
		n, _ := io.Copy(io.Discard, c)
		got <- n
	}()
	var conn net.Conn
	Expect(from.Do(func() (err error) {
		conn, err = net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
		return err
	})).To(Succeed())
	start := time.Now()
	_, err := conn.Write(make([]byte, size))
	Expect(err).NotTo(HaveOccurred())
	Expect(conn.Close()).To(Succeed())
	var n int64
	Eventually(got).WithTimeout(60 * time.Second).Should(Receive(&n))
	Expect(n).To(BeEquivalentTo(size))
	return time.Since(start)
}

var _ = Describe("bandwidth", func() {
	var hostNS, contNS *ns.NetNS

	BeforeEach(func() { hostNS, contNS = newPair() })

	run := func(hooks attach.Hooks, cmd, id string, n *ns.NetNS, stdin []byte) testutil.Output {
		GinkgoHelper()
		return testutil.RunIn(hostNS, bandwidth.New(hooks), testutil.NewCall(cmd, id, "eth0", n, stdin))
	}
	must := func(cmd string, n *ns.NetNS, stdin []byte) testutil.Output {
		GinkgoHelper()
		out := run(attach.Hooks{}, cmd, "ctr1", n, stdin)
		Expect(out.Err).To(BeNil(), "%s: %v", cmd, out.Err)
		return out
	}
	ifb := bandwidth.IfbName(netName, "ctr1")
	// state is what bandwidth could leave in the host: links and qdiscs.
	state := func() []string {
		return append(testutil.LinkNames(hostNS), tc(hostNS, "qdisc", "show"), tc(hostNS, "filter", "show", "dev", "veth-h", "ingress"))
	}

	for _, ver := range bwVersions {
		It("ADD, CHECK, DEL, DEL at "+ver, func() {
			before := state()
			out := must("ADD", contNS, conf(ver, limits, prevFor(ver, contNS, "veth-h")))
			res := testutil.ParseResult(ver, out.Stdout)
			Expect(res.Interfaces).To(HaveLen(3))
			Expect(res.Interfaces[2].Name).To(Equal(ifb))
			Expect(testutil.LinkNames(hostNS)).To(ContainElement(ifb))
			Expect(tc(hostNS, "qdisc", "show", "dev", "veth-h")).To(And(ContainSubstring("qdisc tbf 1: root"), ContainSubstring("rate 4Mbit"), ContainSubstring("qdisc clsact ffff:")))
			Expect(tc(hostNS, "qdisc", "show", "dev", ifb)).To(ContainSubstring("rate 4Mbit"))
			Expect(tc(hostNS, "filter", "show", "dev", "veth-h", "ingress")).To(ContainSubstring("Egress Redirect to device " + ifb))
			if testutil.AtLeast(ver, "0.4.0") {
				must("CHECK", contNS, conf(ver, limits, out.Stdout))
			}
			must("DEL", contNS, conf(ver, limits, out.Stdout))
			Expect(state()).To(Equal(before))
			must("DEL", contNS, conf(ver, limits, nil))
		})
	}

	It("DEL removes the ifb and the shaping with a config that no longer validates", func() {
		// A config edited between ADD and DEL must not keep the attachment
		// from being removed (issue 22): DEL needs only the network name.
		qdiscs := func() []string {
			GinkgoHelper()
			h := testutil.Handle(hostNS)
			l, err := h.LinkByName("veth-h")
			Expect(err).NotTo(HaveOccurred())
			qs, err := h.QdiscList(l)
			Expect(err).NotTo(HaveOccurred())
			var out []string
			for _, q := range qs {
				out = append(out, q.Type())
			}
			return out
		}
		linksBefore, qdiscsBefore := testutil.LinkNames(hostNS), qdiscs()
		out := must("ADD", contNS, conf("1.1.0", limits, prevFor("1.1.0", contNS, "veth-h")))
		Expect(testutil.LinkNames(hostNS)).To(ContainElement(ifb))
		edited := conf("1.1.0", `"ingressRate": 7, "ingressBurst": 1, "egressRate": 8000`, out.Stdout)
		bad := run(attach.Hooks{}, "ADD", "ctr2", contNS, edited)
		testutil.ExpectCode(bad, types.ErrInvalidNetworkConfig, "ADD still refuses it")
		must("DEL", contNS, edited)
		Expect(testutil.LinkNames(hostNS)).To(Equal(linksBefore))
		Expect(qdiscs()).To(Equal(qdiscsBefore))
		must("DEL", contNS, edited)
	})

	It("really slows a 1 MB transfer to 4 Mbit/s in each direction", func() {
		must("ADD", contNS, conf("1.1.0", limits, prevFor("1.1.0", contNS, "veth-h")))
		// 8 Mbit at 4 Mbit/s, less the 0.4 Mbit burst: about 1.9 s. Only a
		// lower bound is asserted: a slow machine may take longer.
		Expect(transfer(hostNS, contNS, contAddr, 1<<20)).To(BeNumerically(">=", 1500*time.Millisecond), "into the container")
		Expect(transfer(contNS, hostNS, hostAddr, 1<<20)).To(BeNumerically(">=", 1500*time.Millisecond), "out of the container")
	})

	It("limits only ingress when only ingress is configured, making no ifb", func() {
		keys := `"ingressRate": 4000000, "ingressBurst": 400000`
		out := must("ADD", contNS, conf("1.1.0", keys, prevFor("1.1.0", contNS, "veth-h")))
		Expect(testutil.ParseResult("1.1.0", out.Stdout).Interfaces).To(HaveLen(2))
		Expect(testutil.LinkNames(hostNS)).NotTo(ContainElement(ifb))
		Expect(tc(hostNS, "qdisc", "show", "dev", "veth-h")).NotTo(ContainSubstring("ingress"))
		Expect(transfer(hostNS, contNS, contAddr, 1<<20)).To(BeNumerically(">=", 1500*time.Millisecond))
		must("CHECK", contNS, conf("1.1.0", keys, out.Stdout))
	})

	// Issue 22: a mutation leaving the ifb at the kernel's default MTU
	// passed every test, as the host end had that MTU too.
	It("gives the ifb the host end's MTU", func() {
		h := testutil.Handle(hostNS)
		host, err := h.LinkByName("veth-h")
		Expect(err).NotTo(HaveOccurred())
		Expect(h.LinkSetMTU(host, 1280)).To(Succeed())
		must("ADD", contNS, conf("1.1.0", limits, prevFor("1.1.0", contNS, "veth-h")))
		l, err := h.LinkByName(ifb)
		Expect(err).NotTo(HaveOccurred())
		Expect(l.Attrs().MTU).To(Equal(1280))
	})

	// Upstream's getBandwidth: the config's top-level keys, when it has
	// any, over runtimeConfig.bandwidth; the runtime's alone otherwise.
	It("takes the static keys over runtimeConfig.bandwidth, and the runtime's without them", func() {
		keys := `"ingressRate": 4000000, "ingressBurst": 400000, "runtimeConfig": {"bandwidth": {"egressRate": 8000000, "egressBurst": 800000}}`
		must("ADD", contNS, conf("1.1.0", keys, prevFor("1.1.0", contNS, "veth-h")))
		Expect(rootTbf(hostNS, "veth-h").Rate).To(BeEquivalentTo(4000000 / 8))
		Expect(testutil.LinkNames(hostNS)).NotTo(ContainElement(ifb))
		must("DEL", contNS, conf("1.1.0", keys, prevFor("1.1.0", contNS, "veth-h")))

		keys = `"runtimeConfig": {"bandwidth": {"egressRate": 8000000, "egressBurst": 800000}}`
		must("ADD", contNS, conf("1.1.0", keys, prevFor("1.1.0", contNS, "veth-h")))
		Expect(rootTbf(hostNS, ifb).Rate).To(BeEquivalentTo(8000000 / 8))
	})

	It("passes prevResult through untouched when no limit is set", func() {
		prev := prevFor("1.1.0", contNS, "veth-h")
		out := must("ADD", contNS, conf("1.1.0", "", prev))
		Expect(testutil.ParseResult("1.1.0", out.Stdout).Interfaces).To(HaveLen(2))
		Expect(testutil.LinkNames(hostNS)).NotTo(ContainElement(ifb))
	})

	DescribeTable("CHECK fails when a piece is missing or different",
		func(breakIt func(), what string) {
			out := must("ADD", contNS, conf("1.1.0", limits, prevFor("1.1.0", contNS, "veth-h")))
			breakIt()
			res := run(attach.Hooks{}, "CHECK", "ctr1", contNS, conf("1.1.0", limits, out.Stdout))
			Expect(res.Err).NotTo(BeNil())
			Expect(res.Err.Msg).To(ContainSubstring(what))
		},
		Entry("the host end's tbf deleted", func() { tc(hostNS, "qdisc", "del", "dev", "veth-h", "root") }, "no tbf root qdisc"),
		Entry("the host end's tbf changed", func() {
			tc(hostNS, "qdisc", "replace", "dev", "veth-h", "root", "handle", "1:", "tbf", "rate", "1mbit", "burst", "50kb", "latency", "25ms")
		}, "configured rate 500000"),
		// Issue 22: a CHECK comparing the rate only passed these.
		Entry("the host end's tbf with the same rate, another burst", func() { replaceTbf(hostNS, "veth-h", 500_000, 1_000_000, 0) }, "buffer 1000000"),
		Entry("the host end's tbf with the same rate and burst, another limit", func() { replaceTbf(hostNS, "veth-h", 500_000, 0, 70_000) }, "limit 70000"),
		Entry("the ifb's tbf with the same rate, another burst", func() { replaceTbf(hostNS, ifb, 500_000, 1_000_000, 0) }, "buffer 1000000"),
		Entry("the ifb deleted", func() {
			Expect(exec.Command("ip", "-n", filepath.Base(hostNS.Path()), "link", "del", ifb).Run()).To(Succeed())
		}, "link not found"),
		Entry("the redirect deleted", func() { tc(hostNS, "filter", "del", "dev", "veth-h", "ingress") }, "not redirected"),
		Entry("the clsact qdisc deleted", func() { tc(hostNS, "qdisc", "del", "dev", "veth-h", "clsact") }, "no ingress or clsact qdisc"),
		Entry("the ifb's tbf deleted", func() { tc(hostNS, "qdisc", "del", "dev", ifb, "root") }, "no tbf root qdisc"),
	)

	It("DEL removes the ifb with the netns gone and CNI_NETNS empty", func() {
		must("ADD", contNS, conf("1.1.0", limits, prevFor("1.1.0", contNS, "veth-h")))
		must("DEL", nil, conf("1.1.0", limits, nil))
		Expect(testutil.LinkNames(hostNS)).NotTo(ContainElement(ifb))
	})

	// What `cniforge gc` sends for an orphaned reservation: the network's
	// config (capabilities, no limits: they came as runtimeConfig), no
	// prevResult, no runtimeConfig, CNI_NETNS empty. The ifb goes by its
	// name (network and container ID).
	It("DEL with neither limits nor prevResult nor netns removes the ifb by its name", func() {
		rc := `"capabilities": {"bandwidth": true}, "runtimeConfig": {"bandwidth": {"egressRate": 4000000, "egressBurst": 400000}}`
		must("ADD", contNS, conf("1.1.0", rc, prevFor("1.1.0", contNS, "veth-h")))
		Expect(testutil.LinkNames(hostNS)).To(ContainElement(ifb))
		must("DEL", nil, conf("1.1.0", `"capabilities": {"bandwidth": true}`, nil))
		Expect(testutil.LinkNames(hostNS)).NotTo(ContainElement(ifb))
		must("DEL", nil, conf("1.1.0", `"capabilities": {"bandwidth": true}`, nil))
	})

	// Issue 22, defect 12: an upstream DEL deletes only the ifb; it leaves
	// the root tbf, the ingress qdisc and a u32 redirect to the ifb that is
	// gone on the host end. ADD over them made "file exists".
	It("ADD replaces the tbf and the dead redirect an upstream DEL left on the host end, and DEL removes them", func() {
		before := state()
		h := testutil.Handle(hostNS)
		host, err := h.LinkByName("veth-h")
		Expect(err).NotTo(HaveOccurred())
		Expect(h.QdiscAdd(&netlink.Tbf{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: host.Attrs().Index, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT},
			Rate: 1000, Buffer: 100000, Limit: 10000})).To(Succeed())
		Expect(h.QdiscAdd(&netlink.Ingress{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: host.Attrs().Index, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_INGRESS}})).To(Succeed())
		la := netlink.NewLinkAttrs()
		la.Name = bandwidth.IfbName(netName, "old")
		Expect(h.LinkAdd(&netlink.Ifb{LinkAttrs: la})).To(Succeed())
		old, err := h.LinkByName(la.Name)
		Expect(err).NotTo(HaveOccurred())
		Expect(h.FilterAdd(&netlink.U32{FilterAttrs: netlink.FilterAttrs{LinkIndex: host.Attrs().Index, Parent: netlink.MakeHandle(0xffff, 0), Priority: 1, Protocol: unix.ETH_P_ALL},
			ClassId: netlink.MakeHandle(1, 1), RedirIndex: old.Attrs().Index})).To(Succeed())
		Expect(h.LinkDel(old)).To(Succeed())

		out := must("ADD", contNS, conf("1.1.0", limits, prevFor("1.1.0", contNS, "veth-h")))
		Expect(rootTbf(hostNS, "veth-h").Rate).To(BeEquivalentTo(500000))
		fs, err := h.FilterList(host, netlink.HANDLE_MIN_INGRESS)
		Expect(err).NotTo(HaveOccurred())
		Expect(fs).To(HaveLen(1), "the dead redirect is gone, ours is there")
		Expect(testutil.Ping(contNS, hostAddr)).To(Succeed())
		must("CHECK", contNS, conf("1.1.0", limits, out.Stdout))
		must("DEL", contNS, conf("1.1.0", limits, out.Stdout))
		Expect(state()).To(Equal(before))
	})

	// The root of the host end is bandwidth's slot only when it is free
	// or holds bandwidth's tbf 1:; another tool's root qdisc, whatever its
	// handle, is refused (issue 29; upstream fails on it with "file
	// exists").
	DescribeTable("ADD refuses a root qdisc that is not bandwidth's, naming it",
		func(q func(index int) netlink.Qdisc, named string) {
			h := testutil.Handle(hostNS)
			host, err := h.LinkByName("veth-h")
			Expect(err).NotTo(HaveOccurred())
			Expect(h.QdiscAdd(q(host.Attrs().Index))).To(Succeed())
			// (tc's text has the qdisc's statistics: packets pass.)
			state := func() []string {
				return append(append(testutil.LinkNames(hostNS), rootAndClasses(hostNS, "veth-h")...), hooks(hostNS, "veth-h")...)
			}
			before := state()
			out := run(attach.Hooks{}, "ADD", "ctr1", contNS, conf("1.1.0", limits, prevFor("1.1.0", contNS, "veth-h")))
			Expect(out.Err).NotTo(BeNil())
			Expect(out.Err.Msg).To(ContainSubstring(named))
			Expect(state()).To(Equal(before))
		},
		Entry("an htb with handle 1:", func(index int) netlink.Qdisc {
			return netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: index, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT})
		}, "(htb 1:)"),
		Entry("an htb with handle 2:", func(index int) netlink.Qdisc {
			return netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: index, Handle: netlink.MakeHandle(2, 0), Parent: netlink.HANDLE_ROOT})
		}, "(htb 2:)"),
		Entry("a tbf with handle 2:", func(index int) netlink.Qdisc {
			return &netlink.Tbf{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: index, Handle: netlink.MakeHandle(2, 0), Parent: netlink.HANDLE_ROOT}, Rate: 1000, Buffer: 100000, Limit: 10000}
		}, "(tbf 2:)"),
	)

	It("DEL without prevResult finds the host end as the peer of CNI_IFNAME, so the next ADD works", func() {
		before := state()
		must("ADD", contNS, conf("1.1.0", limits, prevFor("1.1.0", contNS, "veth-h")))
		must("DEL", contNS, conf("1.1.0", limits, nil))
		Expect(state()).To(Equal(before))
		out := must("ADD", contNS, conf("1.1.0", limits, prevFor("1.1.0", contNS, "veth-h")))
		must("CHECK", contNS, conf("1.1.0", limits, out.Stdout))
	})

	It("ADD replaces an ifb of its own name that a killed ADD left", func() {
		h := testutil.Handle(hostNS)
		la := netlink.NewLinkAttrs()
		la.Name = ifb
		Expect(h.LinkAdd(&netlink.Ifb{LinkAttrs: la})).To(Succeed())
		out := must("ADD", contNS, conf("1.1.0", limits, prevFor("1.1.0", contNS, "veth-h")))
		must("CHECK", contNS, conf("1.1.0", limits, out.Stdout))
	})

	It("GC deletes the ifbs of this network's containers that are not listed", func() {
		c2NS := testutil.NewNS()
		Expect(testutil.ConnectNS(testutil.VethEnd{NS: hostNS, Name: "veth-2"}, testutil.VethEnd{NS: c2NS, Name: "eth0"})).To(Succeed())
		must("ADD", contNS, conf("1.1.0", limits, prevFor("1.1.0", contNS, "veth-h")))
		out := run(attach.Hooks{}, "ADD", "ctr2", c2NS, conf("1.1.0", limits, prevFor("1.1.0", c2NS, "veth-2")))
		Expect(out.Err).To(BeNil())
		// An ifb of another network, and one without our alias, stay.
		Expect(exec.Command("ip", "-n", filepath.Base(hostNS.Path()), "link", "add", bandwidth.IfbName("other", "ctr3"), "type", "ifb").Run()).To(Succeed())
		gc := conf("1.1.0", `"cni.dev/valid-attachments": [{"containerID": "ctr1", "ifname": "eth0"}]`, nil)
		out = testutil.RunIn(hostNS, bandwidth.Plugin, testutil.Call{Command: "GC", Stdin: gc})
		Expect(out.Err).To(BeNil())
		links := testutil.LinkNames(hostNS)
		Expect(links).To(ContainElement(ifb))
		Expect(links).NotTo(ContainElement(bandwidth.IfbName(netName, "ctr2")))
		Expect(links).To(ContainElement(bandwidth.IfbName("other", "ctr3")))
	})

	// Issue 14, kills mid-ADD: tests/killadd found an ifb left after GC when
	// ADD was killed between making it and setting its alias.
	It("GC deletes an unlisted container's ifb that ADD made but did not alias, by its link group", func() {
		must("ADD", contNS, conf("1.1.0", limits, prevFor("1.1.0", contNS, "veth-h")))
		h := testutil.Handle(hostNS)
		for _, n := range []struct {
			name  string
			group uint32
		}{
			{bandwidth.IfbName(netName, "killed"), bandwidth.IfbGroup(netName)}, // ours, not listed: goes
			{bandwidth.IfbName(netName, "upstream"), 0},                         // no group: not ours
			{bandwidth.IfbName("other", "killed"), bandwidth.IfbGroup("other")}, // another network's
		} {
			la := netlink.NewLinkAttrs()
			la.Name, la.Group = n.name, n.group
			Expect(h.LinkAdd(&netlink.Ifb{LinkAttrs: la})).To(Succeed())
		}
		gc := conf("1.1.0", `"cni.dev/valid-attachments": [{"containerID": "ctr1", "ifname": "eth0"}]`, nil)
		out := testutil.RunIn(hostNS, bandwidth.Plugin, testutil.Call{Command: "GC", Stdin: gc})
		Expect(out.Err).To(BeNil())
		links := testutil.LinkNames(hostNS)
		Expect(links).NotTo(ContainElement(bandwidth.IfbName(netName, "killed")))
		Expect(links).To(ContainElements(ifb, bandwidth.IfbName(netName, "upstream"), bandwidth.IfbName("other", "killed")))
	})

	Describe("a failure after each step of ADD leaves nothing", func() {
		DescribeTable("error or panic", func(step string) {
			for _, hook := range []func(string) error{testutil.FailAfter(step, nil), testutil.PanicAfter(step)} {
				before := state()
				out := run(attach.Hooks{AfterStep: hook}, "ADD", "ctr1", contNS, conf("1.1.0", limits, prevFor("1.1.0", contNS, "veth-h")))
				Expect(out.Err).NotTo(BeNil())
				Expect(state()).To(Equal(before))
			}
		}, testutil.StepEntries(bandwidth.AddSteps))
	})

	DescribeTable("refuses bad input with its code and changes nothing",
		func(code int, mutate func(c *testutil.Call), msg string) {
			before := state()
			c := testutil.Call{Command: "ADD", ContainerID: "ctr1", IfName: "eth0", Netns: contNS.Path(),
				Stdin: conf("1.1.0", limits, prevFor("1.1.0", contNS, "veth-h"))}
			mutate(&c)
			out := testutil.RunIn(hostNS, bandwidth.Plugin, c)
			testutil.ExpectCode(out, code)
			Expect(out.Err.Msg + out.Err.Details).To(ContainSubstring(msg))
			Expect(state()).To(Equal(before))
		},
		Entry("not JSON (6)", 6, func(c *testutil.Call) { c.Stdin = []byte("{") }, ""),
		Entry("CNI_CONTAINERID missing (4)", 4, func(c *testutil.Call) { c.ContainerID = "" }, "CNI_CONTAINERID"),
		Entry("a version bandwidth does not speak (1)", 1, func(c *testutil.Call) { c.Stdin = conf("0.2.0", limits, nil) }, "0.2.0"),
		Entry("no prevResult (7)", 7, func(c *testutil.Call) { c.Stdin = conf("1.1.0", limits, nil) }, "prevResult: missing"),
		Entry("a rate without burst (7)", 7, func(c *testutil.Call) {
			c.Stdin = conf("1.1.0", `"egressRate": 1000`, prevFor("1.1.0", contNS, "veth-h"))
		}, "egressBurst: missing"),
		Entry("a burst below a byte (7)", 7, func(c *testutil.Call) {
			c.Stdin = conf("1.1.0", `"ingressRate": 8000, "ingressBurst": 7`, prevFor("1.1.0", contNS, "veth-h"))
		}, "ingressBurst: 7"),
		Entry("a host end prevResult does not list (7)", 7, func(c *testutil.Call) {
			c.Stdin = conf("1.1.0", limits, prevFor("1.1.0", contNS, "other0"))
		}, `no host interface "veth-h"`),
	)

	// Issue 23: containerd sends both bursts as 4294967295 bits, CRI-O as
	// 34359738359 (v1.34's math.MaxUint32*8-1, as its log shows in the
	// Kubernetes lane), whatever the pod asks for.
	// The pod starts: a burst tbf cannot hold at the rate is clamped to
	// the largest it can (about 275 s of traffic), said on stderr, and
	// CHECK accepts what ADD installed.
	DescribeTable("ADDs and CHECKs with the bursts runtimes send",
		func(rate, burst uint64, runtime, clamped bool) {
			keys := fmt.Sprintf(`"ingressRate": %d, "ingressBurst": %d, "egressRate": %d, "egressBurst": %d`, rate, burst, rate, burst)
			if runtime {
				keys = `"runtimeConfig": {"bandwidth": {` + keys + `}}`
			}
			c := testutil.Call{Command: "ADD", ContainerID: "ctr1", IfName: "eth0", Netns: contNS.Path(),
				Stdin: conf("1.1.0", keys, prevFor("1.1.0", contNS, "veth-h"))}
			out := testutil.ExecIn(hostNS, "bandwidth", c)
			Expect(out.Err).To(BeNil())
			if clamped {
				Expect(string(out.Stderr)).To(And(ContainSubstring("burst clamped"), ContainSubstring("Burst")))
			} else {
				Expect(string(out.Stderr)).NotTo(ContainSubstring("clamped"))
			}
			tick := netlink.TickInUsec()
			for _, l := range []string{"veth-h", ifb} {
				t := rootTbf(hostNS, l)
				Expect(t.Rate).To(Equal(rate/8), l)
				if clamped {
					// The buffer is within a byte and a microsecond (both
					// truncated) of 2^32-1 ticks.
					Expect(float64(t.Buffer)).To(BeNumerically(">", math.MaxUint32-(8e6/float64(rate)+1)*tick-1), l)
				} else {
					usec := math.Trunc(float64(burst/8) * 1e6 / float64(rate/8))
					Expect(t.Buffer).To(BeEquivalentTo(math.Trunc(usec*tick)), l)
				}
			}
			c.Command, c.Stdin = "CHECK", conf("1.1.0", keys, out.Stdout)
			Expect(testutil.RunIn(hostNS, bandwidth.Plugin, c).Err).To(BeNil())
			c.Command = "DEL"
			Expect(testutil.RunIn(hostNS, bandwidth.Plugin, c).Err).To(BeNil())
		},
		Entry("containerd at 10 Mbit/s (clamped)", uint64(10_000_000), uint64(math.MaxUint32), true, true),
		Entry("containerd at 1 Mbit/s, top-level keys (clamped)", uint64(1_000_000), uint64(math.MaxUint32), false, true),
		Entry("containerd at 100 Mbit/s (fits)", uint64(100_000_000), uint64(math.MaxUint32), true, false),
		Entry("CRI-O at 10 Mbit/s (clamped)", uint64(10_000_000), uint64(34359738359), true, true),
		Entry("CRI-O at 100 Mbit/s (clamped)", uint64(100_000_000), uint64(34359738359), true, true),
		Entry("CRI-O at 1 Gbit/s (fits; the limit stops at 2^32-1)", uint64(1_000_000_000), uint64(34359738367), true, false),
		Entry("CRI-O's math.MaxUint32*8-1 at 10 Mbit/s (clamped)", uint64(10_000_000), uint64(math.MaxUint32*8-1), true, true),
		Entry("older CRI-O (math.MaxUint32*8) at 1 Mbit/s (clamped)", uint64(1_000_000), uint64(math.MaxUint32*8), true, true),
	)

	It("refuses an interface that is not a veth with a clear error", func() {
		Expect(exec.Command("ip", "-n", filepath.Base(contNS.Path()), "link", "add", "name", "net1", "type", "bridge").Run()).To(Succeed())
		c := testutil.Call{Command: "ADD", ContainerID: "ctr1", IfName: "net1", Netns: contNS.Path(),
			Stdin: conf("1.1.0", limits, prevFor("1.1.0", contNS, "veth-h"))}
		out := testutil.RunIn(hostNS, bandwidth.Plugin, c)
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Msg).To(ContainSubstring(`interface "net1"`))
		Expect(out.Err.Msg).To(ContainSubstring("is a bridge, not a veth"))
	})

	It("answers STATUS", func() {
		out := testutil.RunIn(hostNS, bandwidth.Plugin, testutil.Call{Command: "STATUS", Stdin: conf("1.1.0", limits, nil)})
		Expect(out.Err).To(BeNil())
	})
})

// The ifb is named for the container on the network (upstream's name), not
// for the interface: a container attached twice to one network (Multus can)
// has both host ends redirected to one ifb. DEL of one interface must not
// take the ifb the other's traffic still goes through.
var _ = It("keeps the ifb at DEL of one interface while the container's other interface on the network redirects to it", func() {
	hostNS, contNS := newPair()
	Expect(testutil.ConnectNS(
		testutil.VethEnd{NS: hostNS, Name: "veth-h2", Addrs: []string{"10.8.1.1/24"}},
		testutil.VethEnd{NS: contNS, Name: "eth1", Addrs: []string{"10.8.1.2/24"}},
	)).To(Succeed())
	prevEth1 := []byte(`{"cniVersion": "1.1.0", "interfaces": [{"name": "veth-h2"}, {"name": "eth1", "sandbox": "` + contNS.Path() + `"}],
		"ips": [{"address": "10.8.1.2/24", "interface": 1}]}`)
	keys := `"egressRate": 4000000, "egressBurst": 400000`
	eth1 := testutil.Call{ContainerID: "ctr1", IfName: "eth1", Netns: contNS.Path(), Stdin: conf("1.1.0", keys, prevEth1)}
	mustCtr1(hostNS, contNS, "ADD", conf("1.1.0", keys, prevFor("1.1.0", contNS, "veth-h")))
	eth1.Command = "ADD"
	testutil.MustRunIn(hostNS, bandwidth.Plugin, eth1)

	h := testutil.Handle(hostNS)
	// The alias bridge and ptp give a host end: "cni:<containerID>:<ifname>".
	for end, ifName := range map[string]string{"veth-h": "eth0", "veth-h2": "eth1"} {
		l, err := h.LinkByName(end)
		Expect(err).NotTo(HaveOccurred())
		Expect(h.LinkSetAlias(l, "cni:ctr1:"+ifName)).To(Succeed())
	}
	ifbName := bandwidth.IfbName(netName, "ctr1")
	redirectsTo := func(from string) []int {
		GinkgoHelper()
		l, err := h.LinkByName(from)
		Expect(err).NotTo(HaveOccurred())
		fs, err := h.FilterList(l, netlink.HANDLE_MIN_INGRESS)
		Expect(err).NotTo(HaveOccurred())
		var to []int
		for _, f := range fs {
			if u, ok := f.(*netlink.U32); ok {
				for _, act := range u.Actions {
					if m, ok := act.(*netlink.MirredAction); ok {
						to = append(to, m.Ifindex)
					}
				}
			}
		}
		return to
	}
	ifb, err := h.LinkByName(ifbName)
	Expect(err).NotTo(HaveOccurred())
	Expect(redirectsTo("veth-h")).To(Equal([]int{ifb.Attrs().Index}))
	Expect(redirectsTo("veth-h2")).To(Equal([]int{ifb.Attrs().Index}))

	eth1.Command = "DEL"
	testutil.MustRunIn(hostNS, bandwidth.Plugin, eth1)
	Expect(redirectsTo("veth-h2")).To(BeEmpty())
	kept, err := h.LinkByName(ifbName)
	Expect(err).NotTo(HaveOccurred(), "eth0's traffic still goes through the ifb")
	Expect(kept.Attrs().Index).To(Equal(ifb.Attrs().Index))
	Expect(redirectsTo("veth-h")).To(Equal([]int{ifb.Attrs().Index}))

	mustCtr1(hostNS, contNS, "DEL", conf("1.1.0", keys, prevFor("1.1.0", contNS, "veth-h")))
	Expect(testutil.LinkNames(hostNS)).NotTo(ContainElement(ifbName), "the last DEL takes the ifb")
})

// DEL without prevResult or netns cannot find its host end to clean; that
// end's own redirect, tagged with this attachment's alias, keeps no ifb.
var _ = It("deletes the ifb at DEL without prevResult or netns though its own host end still redirects to it", func() {
	hostNS, contNS := newPair()
	h := testutil.Handle(hostNS)
	l, err := h.LinkByName("veth-h")
	Expect(err).NotTo(HaveOccurred())
	Expect(h.LinkSetAlias(l, "cni:ctr1:eth0")).To(Succeed())
	keys := `"egressRate": 4000000, "egressBurst": 400000`
	mustCtr1(hostNS, contNS, "ADD", conf("1.1.0", keys, prevFor("1.1.0", contNS, "veth-h")))
	ifbName := bandwidth.IfbName(netName, "ctr1")
	Expect(testutil.LinkNames(hostNS)).To(ContainElement(ifbName))

	testutil.MustRunIn(hostNS, bandwidth.Plugin, testutil.Call{Command: "DEL", ContainerID: "ctr1", IfName: "eth0", Stdin: conf("1.1.0", keys, nil)})
	Expect(testutil.LinkNames(hostNS)).NotTo(ContainElement(ifbName))
})
