package bandwidth_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

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

	BeforeEach(func() {
		hostNS = testutil.NewNS()
		contNS = testutil.NewNS()
		Expect(testutil.ConnectNS(
			testutil.VethEnd{NS: hostNS, Name: "veth-h", Addrs: []string{hostAddr + "/24"}},
			testutil.VethEnd{NS: contNS, Name: "eth0", Addrs: []string{contAddr + "/24"}},
		)).To(Succeed())
	})

	run := func(hooks attach.Hooks, cmd, id string, n *ns.NetNS, stdin []byte) testutil.Output {
		GinkgoHelper()
		c := testutil.Call{Command: cmd, ContainerID: id, IfName: "eth0", Stdin: stdin}
		if n != nil {
			c.Netns = n.Path()
		}
		return testutil.RunIn(hostNS, bandwidth.New(hooks), c)
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
			Expect(tc(hostNS, "qdisc", "show", "dev", "veth-h")).To(And(ContainSubstring("qdisc tbf 1: root"), ContainSubstring("rate 4Mbit"), ContainSubstring("qdisc ingress ffff:")))
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
		Expect(bad.Err).NotTo(BeNil())
		Expect(bad.Err.Code).To(BeEquivalentTo(types.ErrInvalidNetworkConfig), "ADD still refuses it")
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

	It("lets runtimeConfig.bandwidth override the static keys", func() {
		keys := `"ingressRate": 4000000, "ingressBurst": 400000, "runtimeConfig": {"bandwidth": {"egressRate": 8000000, "egressBurst": 800000}}`
		must("ADD", contNS, conf("1.1.0", keys, prevFor("1.1.0", contNS, "veth-h")))
		Expect(tc(hostNS, "qdisc", "show", "dev", "veth-h")).NotTo(ContainSubstring("tbf"))
		Expect(tc(hostNS, "qdisc", "show", "dev", ifb)).To(ContainSubstring("rate 8Mbit"))
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
		Entry("the ifb deleted", func() {
			Expect(exec.Command("ip", "-n", filepath.Base(hostNS.Path()), "link", "del", ifb).Run()).To(Succeed())
		}, "link not found"),
		Entry("the redirect deleted", func() { tc(hostNS, "filter", "del", "dev", "veth-h", "ingress") }, "not redirected"),
		Entry("the ingress qdisc deleted", func() { tc(hostNS, "qdisc", "del", "dev", "veth-h", "ingress") }, "no ingress qdisc"),
		Entry("the ifb's tbf deleted", func() { tc(hostNS, "qdisc", "del", "dev", ifb, "root") }, "no tbf root qdisc"),
	)

	It("DEL removes the ifb with the netns gone and CNI_NETNS empty", func() {
		must("ADD", contNS, conf("1.1.0", limits, prevFor("1.1.0", contNS, "veth-h")))
		must("DEL", nil, conf("1.1.0", limits, nil))
		Expect(testutil.LinkNames(hostNS)).NotTo(ContainElement(ifb))
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
			Expect(out.Err).NotTo(BeNil())
			Expect(out.Err.Code).To(BeEquivalentTo(code))
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
		Entry("a burst tbf cannot hold (7)", 7, func(c *testutil.Call) {
			c.Stdin = conf("1.1.0", `"ingressRate": 8, "ingressBurst": 80000000000`, prevFor("1.1.0", contNS, "veth-h"))
		}, "ingressBurst"),
		Entry("a host end prevResult does not list (7)", 7, func(c *testutil.Call) {
			c.Stdin = conf("1.1.0", limits, prevFor("1.1.0", contNS, "other0"))
		}, `no host interface "veth-h"`),
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
