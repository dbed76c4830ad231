package bandwidth_test

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/meta/bandwidth"
)

// classifiers lists every classifier on hook of link in n as "kind pref
// N", read from a raw netlink dump: netlink.FilterList leaves out a u32
// with no filter in it (only its hash table), the remains a DEL deleting
// the filter and not its classifier leaves behind.
func classifiers(n *ns.NetNS, link string, hook uint32) []string {
	GinkgoHelper()
	l, err := testutil.Handle(n).LinkByName(link)
	Expect(err).NotTo(HaveOccurred())
	seen := map[string]bool{}
	Expect(n.Do(func() error {
		req := nl.NewNetlinkRequest(unix.RTM_GETTFILTER, unix.NLM_F_DUMP)
		req.AddData(&nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: int32(l.Attrs().Index), Parent: hook})
		msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWTFILTER)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			t := nl.DeserializeTcMsg(m)
			attrs, err := nl.ParseRouteAttr(m[t.Len():])
			if err != nil {
				return err
			}
			for _, a := range attrs {
				if a.Attr.Type == nl.TCA_KIND {
					seen[fmt.Sprintf("%s pref %d", strings.TrimRight(string(a.Value), "\x00"), t.Info>>16)] = true
				}
			}
		}
		return nil
	})).To(Succeed())
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// u32s are the u32 classifiers among cs.
func u32s(cs []string) []string {
	var out []string
	for _, c := range cs {
		if strings.HasPrefix(c, "u32 ") {
			out = append(out, c)
		}
	}
	return out
}

// rootAndClasses describes the root qdisc of link in n and its classes,
// with their parameters (statistics left out), read over netlink.
func rootAndClasses(n *ns.NetNS, link string) []string {
	GinkgoHelper()
	var out []string
	for _, q := range qdiscsOf(n, link) {
		if q.Attrs().Parent != netlink.HANDLE_ROOT {
			continue
		}
		d := fmt.Sprintf("qdisc %s %s", q.Type(), netlink.HandleStr(q.Attrs().Handle))
		if t, ok := q.(*netlink.Htb); ok {
			d += fmt.Sprintf(" defcls %x r2q %d", t.Defcls, t.Rate2Quantum)
		}
		out = append(out, d)
	}
	h := testutil.Handle(n)
	l, err := h.LinkByName(link)
	Expect(err).NotTo(HaveOccurred())
	cs, err := h.ClassList(l, netlink.HANDLE_ROOT)
	Expect(err).NotTo(HaveOccurred())
	for _, c := range cs {
		d := fmt.Sprintf("class %s %s parent %s", c.Type(), netlink.HandleStr(c.Attrs().Handle), netlink.HandleStr(c.Attrs().Parent))
		if hc, ok := c.(*netlink.HtbClass); ok {
			d += fmt.Sprintf(" rate %d ceil %d buffer %d cbuffer %d", hc.Rate, hc.Ceil, hc.Buffer, hc.Cbuffer)
		}
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// foreignHtb stands in for another shaping tool on link in n: an htb root
// (handle 2:, default class 10) with one class.
func foreignHtb(n *ns.NetNS, link string) {
	GinkgoHelper()
	h := testutil.Handle(n)
	l, err := h.LinkByName(link)
	Expect(err).NotTo(HaveOccurred())
	q := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Handle: netlink.MakeHandle(2, 0), Parent: netlink.HANDLE_ROOT})
	q.Defcls = 0x10
	Expect(h.QdiscAdd(q)).To(Succeed())
	c := netlink.NewHtbClass(netlink.ClassAttrs{LinkIndex: l.Attrs().Index, Parent: q.Handle, Handle: netlink.MakeHandle(2, 0x10)},
		netlink.HtbClassAttrs{Rate: 3_000_000, Ceil: 6_000_000, Buffer: 40000, Cbuffer: 40000})
	Expect(h.ClassAdd(c)).To(Succeed())
}

// toolRedirect stands in for another tool that mirrors what the container
// sends to its own ifb "tool0": a u32 filter with a mirred redirect at
// prio on the ingress hook of link in n (its clsact made if missing).
func toolRedirect(n *ns.NetNS, link string, prio uint16) {
	GinkgoHelper()
	h := testutil.Handle(n)
	l, err := h.LinkByName(link)
	Expect(err).NotTo(HaveOccurred())
	la := netlink.NewLinkAttrs()
	la.Name = "tool0"
	Expect(h.LinkAdd(&netlink.Ifb{LinkAttrs: la})).To(Succeed())
	t, err := h.LinkByName("tool0")
	Expect(err).NotTo(HaveOccurred())
	Expect(h.QdiscReplace(&netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_INGRESS}})).To(Succeed())
	Expect(h.FilterAdd(&netlink.U32{FilterAttrs: netlink.FilterAttrs{LinkIndex: l.Attrs().Index, Parent: netlink.HANDLE_MIN_INGRESS, Priority: prio, Protocol: unix.ETH_P_ALL},
		ClassId: netlink.MakeHandle(1, 1), RedirIndex: t.Attrs().Index})).To(Succeed())
}

// redirectsTo lists the priorities of the u32 redirects to target on the
// ingress hook of link in n.
func redirectsTo(n *ns.NetNS, link, target string) []uint16 {
	GinkgoHelper()
	t, err := testutil.Handle(n).LinkByName(target)
	Expect(err).NotTo(HaveOccurred())
	var prios []uint16
	for _, f := range ingressFilters(n, link) {
		if u, ok := f.(*netlink.U32); ok && u.RedirIndex == t.Attrs().Index {
			prios = append(prios, f.Attrs().Priority)
		}
	}
	return prios
}

// ingressFilters lists the filters on link's ingress hook in n.
func ingressFilters(n *ns.NetNS, link string) []netlink.Filter {
	GinkgoHelper()
	h := testutil.Handle(n)
	l, err := h.LinkByName(link)
	Expect(err).NotTo(HaveOccurred())
	fs, err := h.FilterList(l, netlink.HANDLE_MIN_INGRESS)
	Expect(err).NotTo(HaveOccurred())
	return fs
}

var _ = Describe("bandwidth beside another tool's qdiscs and filters", func() {
	p := usePair()
	state := func() []string {
		return append(append(testutil.LinkNames(p.hostNS), hooks(p.hostNS, "veth-h")...), qdiscKinds(p.hostNS, "veth-h")...)
	}
	egressOnly := `"egressRate": 4000000, "egressBurst": 400000`

	// Issue 29, item 6: ADD replaced a foreign htb root, and the undo
	// after a later failure left noqueue. Upstream's ADD (1.1.1) fails on
	// any root qdisc there ("create qdisc: file exists") and leaves it; so
	// does ours, before changing anything, saying whose slot it is.
	It("refuses an ingress limit where another tool's htb is the root, leaving it and changing nothing", func() {
		foreignHtb(p.hostNS, "veth-h")
		theirs, before := rootAndClasses(p.hostNS, "veth-h"), state()
		for _, hook := range []func(string) error{nil, testutil.FailAfter(bandwidth.StepEgress, nil)} {
			out := p.run(attach.Hooks{AfterStep: hook}, "ADD", conf("1.1.0", limits, prevFor("1.1.0", p.contNS, "veth-h")))
			Expect(out.Err).NotTo(BeNil())
			Expect(out.Err.Msg).To(And(ContainSubstring(`"veth-h"`), ContainSubstring(`"eth0" in `+p.contNS.Path()), ContainSubstring("(htb 2:)"), ContainSubstring("another tool's root qdisc")))
			Expect(rootAndClasses(p.hostNS, "veth-h")).To(Equal(theirs))
			Expect(state()).To(Equal(before))
		}
	})

	DescribeTable("an egress-only limit beside another tool's htb root: a failure after each step of ADD leaves the htb as it was",
		func(step string) {
			foreignHtb(p.hostNS, "veth-h")
			theirs, before := rootAndClasses(p.hostNS, "veth-h"), state()
			out := p.run(attach.Hooks{AfterStep: testutil.FailAfter(step, nil)}, "ADD", conf("1.1.0", egressOnly, prevFor("1.1.0", p.contNS, "veth-h")))
			Expect(out.Err).NotTo(BeNil())
			Expect(rootAndClasses(p.hostNS, "veth-h")).To(Equal(theirs))
			Expect(state()).To(Equal(before))
		}, testutil.StepEntries(bandwidth.AddSteps))

	// Surviving mutation: DEL deleting any root qdisc, not only its tbf.
	It("ADD, CHECK, DEL of an egress-only limit leave another tool's htb root as it was", func() {
		foreignHtb(p.hostNS, "veth-h")
		theirs, before := rootAndClasses(p.hostNS, "veth-h"), state()
		out := p.must("ADD", conf("1.1.0", egressOnly, prevFor("1.1.0", p.contNS, "veth-h")))
		Expect(rootAndClasses(p.hostNS, "veth-h")).To(Equal(theirs))
		p.must("CHECK", conf("1.1.0", egressOnly, out.Stdout))
		p.must("DEL", conf("1.1.0", egressOnly, out.Stdout))
		Expect(rootAndClasses(p.hostNS, "veth-h")).To(Equal(theirs))
		Expect(state()).To(Equal(before))
		// Without prevResult: the host end found as the peer.
		p.must("ADD", conf("1.1.0", egressOnly, prevFor("1.1.0", p.contNS, "veth-h")))
		p.must("DEL", conf("1.1.0", egressOnly, nil))
		Expect(rootAndClasses(p.hostNS, "veth-h")).To(Equal(theirs))
	})

	It("DEL leaves an htb another tool put at the root after ADD", func() {
		out := p.must("ADD", conf("1.1.0", limits, prevFor("1.1.0", p.contNS, "veth-h")))
		Expect(testutil.Handle(p.hostNS).QdiscDel(rootTbf(p.hostNS, "veth-h"))).To(Succeed())
		foreignHtb(p.hostNS, "veth-h")
		theirs := rootAndClasses(p.hostNS, "veth-h")
		p.must("DEL", conf("1.1.0", limits, out.Stdout))
		Expect(rootAndClasses(p.hostNS, "veth-h")).To(Equal(theirs))
	})

	// The kernel deletes a u32 classifier with its last filter only when no
	// other u32 shares the qdisc's hash tables (see the next table).
	It("DEL on another tool's clsact leaves no u32 of its own at any priority", func() {
		otherTool(p.hostNS, "veth-h", netlink.TC_ACT_UNSPEC)
		theirs, cls := hooks(p.hostNS, "veth-h"), classifiers(p.hostNS, "veth-h", netlink.HANDLE_MIN_INGRESS)
		Expect(u32s(cls)).To(BeEmpty())
		out := p.must("ADD", conf("1.1.0", limits, prevFor("1.1.0", p.contNS, "veth-h")))
		Expect(u32s(classifiers(p.hostNS, "veth-h", netlink.HANDLE_MIN_INGRESS))).To(Equal([]string{"u32 pref 65535"}))
		p.must("DEL", conf("1.1.0", limits, out.Stdout))
		Expect(classifiers(p.hostNS, "veth-h", netlink.HANDLE_MIN_INGRESS)).To(Equal(cls))
		Expect(hooks(p.hostNS, "veth-h")).To(Equal(theirs))
	})

	// Surviving mutation: counting any u32 mirred redirect as bandwidth's.
	// The tool's redirect at another priority, and in the same u32 as
	// bandwidth's (priority 65535), stays through ADD and DEL.
	// Issue 29, item 7: with another u32 on the clsact (at priority 10),
	// deleting bandwidth's filter by its handle left its classifier, an
	// empty hash table, at priority 65535.
	DescribeTable("ADD and DEL leave another tool's u32 redirect on the ingress hook",
		func(prio uint16) {
			toolRedirect(p.hostNS, "veth-h", prio)
			cls := classifiers(p.hostNS, "veth-h", netlink.HANDLE_MIN_INGRESS)
			out := p.must("ADD", conf("1.1.0", limits, prevFor("1.1.0", p.contNS, "veth-h")))
			Expect(redirectsTo(p.hostNS, "veth-h", "tool0")).To(Equal([]uint16{prio}))
			Expect(redirectsTo(p.hostNS, "veth-h", bandwidth.IfbName(netName, "ctr1"))).To(Equal([]uint16{0xffff}))
			p.must("CHECK", conf("1.1.0", limits, out.Stdout))
			p.must("DEL", conf("1.1.0", limits, out.Stdout))
			Expect(redirectsTo(p.hostNS, "veth-h", "tool0")).To(Equal([]uint16{prio}))
			Expect(classifiers(p.hostNS, "veth-h", netlink.HANDLE_MIN_INGRESS)).To(Equal(cls))
			Expect(qdiscKinds(p.hostNS, "veth-h")).To(ContainElement("clsact"))
		},
		Entry("at priority 10", uint16(10)),
		Entry("at priority 65535, in bandwidth's u32", uint16(0xffff)),
	)

	// Surviving mutation: deleting the hook's qdisc while another tool's
	// filters remain on its egress hook.
	It("DEL leaves a clsact that has only another tool's egress filters", func() {
		h := testutil.Handle(p.hostNS)
		l, err := h.LinkByName("veth-h")
		Expect(err).NotTo(HaveOccurred())
		Expect(h.QdiscAdd(&netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_INGRESS}})).To(Succeed())
		fd := loadProg(int32(netlink.TC_ACT_OK))
		Expect(h.FilterAdd(&netlink.BpfFilter{
			FilterAttrs: netlink.FilterAttrs{LinkIndex: l.Attrs().Index, Parent: netlink.HANDLE_MIN_EGRESS, Priority: 1, Handle: 1, Protocol: unix.ETH_P_ALL},
			Fd:          fd, Name: "agent-out", DirectAction: true,
		})).To(Succeed())
		Expect(unix.Close(fd)).To(Succeed())
		theirs := hooks(p.hostNS, "veth-h")
		Expect(theirs).To(ContainElement("qdisc clsact"))
		out := p.must("ADD", conf("1.1.0", limits, prevFor("1.1.0", p.contNS, "veth-h")))
		p.must("DEL", conf("1.1.0", limits, out.Stdout))
		Expect(hooks(p.hostNS, "veth-h")).To(Equal(theirs))
		Expect(u32s(classifiers(p.hostNS, "veth-h", netlink.HANDLE_MIN_INGRESS))).To(BeEmpty())
	})

	// Surviving mutation: DEL without prevResult taking the link at the
	// peer's index in the host netns as the host end without checking
	// that it points back. Here CNI_IFNAME's peer lives in another netns
	// at index 50, and the host netns's link 50 is another pod's host end.
	It("DEL without prevResult leaves the shaping of a host link that has the peer's index but is not its peer", func() {
		otherNS, farNS, c1NS := testutil.NewNS(), testutil.NewNS(), testutil.NewNS()
		ipIn := func(n *ns.NetNS, args ...string) {
			GinkgoHelper()
			out, err := exec.Command("ip", append([]string{"-n", filepath.Base(n.Path())}, args...)...).CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), "%s", out)
		}
		// The other pod: host end veth-o (index 50), its eth0 index 70.
		ipIn(p.hostNS, "link", "add", "veth-o", "index", "50", "type", "veth", "peer", "name", "eth0", "index", "70", "netns", filepath.Base(otherNS.Path()))
		// This pod: eth0 (index 60), its peer at index 50 in farNS.
		ipIn(farNS, "link", "add", "peer-x", "index", "50", "type", "veth", "peer", "name", "eth0", "index", "60", "netns", filepath.Base(c1NS.Path()))
		ipIn(p.hostNS, "link", "set", "veth-o", "up")
		ipIn(otherNS, "link", "set", "eth0", "up")
		c2 := testutil.Call{Command: "ADD", ContainerID: "ctr2", IfName: "eth0", Netns: otherNS.Path(), Stdin: conf("1.1.0", limits, prevFor("1.1.0", otherNS, "veth-o"))}
		out := testutil.RunIn(p.hostNS, bandwidth.Plugin, c2)
		Expect(out.Err).To(BeNil())
		before := tbfOf(p.hostNS, "veth-o")

		del := testutil.RunIn(p.hostNS, bandwidth.Plugin, testutil.Call{Command: "DEL", ContainerID: "ctr1", IfName: "eth0", Netns: c1NS.Path(), Stdin: conf("1.1.0", limits, nil)})
		Expect(del.Err).To(BeNil())
		Expect(tbfOf(p.hostNS, "veth-o")).To(Equal(before))
		Expect(redirectsTo(p.hostNS, "veth-o", bandwidth.IfbName(netName, "ctr2"))).To(HaveLen(1))
		c2.Command, c2.Stdin = "CHECK", conf("1.1.0", limits, out.Stdout)
		Expect(testutil.RunIn(p.hostNS, bandwidth.Plugin, c2).Err).To(BeNil())
	})
})
