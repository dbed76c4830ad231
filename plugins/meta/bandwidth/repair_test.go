package bandwidth_test

import (
	"fmt"
	"sort"

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

// deletions listens to n's link and tc notifications from now on; the
// func it returns lists the deletions among those queued so far (the
// kernel queues them before it answers the change, so they are all there
// once the command that made them returns).
func deletions(n *ns.NetNS) func() []string {
	GinkgoHelper()
	var s *nl.NetlinkSocket
	Expect(n.Do(func() (err error) {
		s, err = nl.Subscribe(unix.NETLINK_ROUTE, unix.RTNLGRP_LINK, unix.RTNLGRP_TC)
		return err
	})).To(Succeed())
	DeferCleanup(s.Close)
	// Only ends the read once the queue is empty.
	Expect(s.SetReceiveTimeout(&unix.Timeval{Usec: 1000})).To(Succeed())
	return func() []string {
		seen := map[string]bool{}
		for {
			msgs, _, err := s.Receive()
			if err != nil {
				break
			}
			for _, m := range msgs {
				switch m.Header.Type {
				case unix.RTM_DELLINK:
					seen["del link"] = true
				case unix.RTM_DELQDISC:
					// The kernel's default qdisc (0:) gives way to any
					// qdisc added at the root: not a deletion of a change.
					if t := nl.DeserializeTcMsg(m.Data); t.Handle != 0 {
						seen[fmt.Sprintf("del qdisc %x: of link %d", t.Handle>>16, t.Ifindex)] = true
					}
				case unix.RTM_DELTFILTER:
					t := nl.DeserializeTcMsg(m.Data)
					seen[fmt.Sprintf("del filter pref %d", t.Info>>16)] = true
				}
			}
		}
		var out []string // nil: none
		for k := range seen {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
}

// tbfOf describes the root tbf of link in n: its handle and parameters.
func tbfOf(n *ns.NetNS, link string) string {
	GinkgoHelper()
	t := rootTbf(n, link)
	return fmt.Sprintf("%x: rate %d buffer %d limit %d", t.Handle>>16, t.Rate, t.Buffer, t.Limit)
}

// Issue 29, item 2: `cniforge check --repair` runs bandwidth's ADD alone
// over a live attachment. ADD keeps what is there and right (nothing is
// deleted: no moment without shaping), re-makes what is missing or
// different, and touches no other tool's qdisc or filter.
var _ = Describe("bandwidth ADD over a live attachment (check --repair)", func() {
	p := usePair()
	ifb := bandwidth.IfbName(netName, "ctr1")
	link := func(name string) netlink.Link {
		GinkgoHelper()
		l, err := testutil.Handle(p.hostNS).LinkByName(name)
		Expect(err).NotTo(HaveOccurred())
		return l
	}
	// shaping is every piece of the attachment, read over netlink.
	shaping := func() []string {
		GinkgoHelper()
		return append([]string{
			"in " + tbfOf(p.hostNS, "veth-h"),
			"out " + tbfOf(p.hostNS, ifb),
			fmt.Sprintf("ifb #%d mtu %d up %v", link(ifb).Attrs().Index, link(ifb).Attrs().MTU, link(ifb).Attrs().Flags&1 != 0),
			fmt.Sprintf("redirects %v", redirectsTo(p.hostNS, "veth-h", ifb)),
		}, u32s(classifiers(p.hostNS, "veth-h", netlink.HANDLE_MIN_INGRESS))...)
	}

	DescribeTable("ADD again fixes each drift in place, CHECK passes, another tool's clsact and programs stay",
		func(drift func(), deleted []string) {
			otherTool(p.hostNS, "veth-h", netlink.TC_ACT_UNSPEC)
			theirs := hooks(p.hostNS, "veth-h")
			add := conf("1.1.0", limits, prevFor("1.1.0", p.contNS, "veth-h"))
			out := p.must("ADD", add)
			want, ifbIndex := shaping(), link(ifb).Attrs().Index
			if drift != nil {
				drift()
				Expect(p.run(attach.Hooks{}, "CHECK", conf("1.1.0", limits, out.Stdout)).Err).NotTo(BeNil(), "CHECK sees the drift")
			}
			seen := deletions(p.hostNS)
			out = p.must("ADD", add)
			Expect(seen()).To(Equal(deleted))
			p.must("CHECK", conf("1.1.0", limits, out.Stdout))
			Expect(hooks(p.hostNS, "veth-h")).To(Equal(theirs))
			if deleted == nil {
				Expect(link(ifb).Attrs().Index).To(Equal(ifbIndex), "the same ifb")
				Expect(shaping()).To(Equal(want))
			}
			Expect(u32s(classifiers(p.hostNS, "veth-h", netlink.HANDLE_MIN_INGRESS))).To(Equal([]string{"u32 pref 65535"}))
			p.must("DEL", conf("1.1.0", limits, out.Stdout))
			Expect(hooks(p.hostNS, "veth-h")).To(Equal(theirs))
		},
		Entry("nothing drifted: nothing is deleted", nil, nil),
		Entry("the host end's tbf deleted", func() { Expect(testutil.Handle(p.hostNS).QdiscDel(rootTbf(p.hostNS, "veth-h"))).To(Succeed()) }, nil),
		Entry("the host end's tbf changed", func() { replaceTbf(p.hostNS, "veth-h", 1000, 200_000, 0) }, nil),
		Entry("the ifb's tbf deleted", func() { Expect(testutil.Handle(p.hostNS).QdiscDel(rootTbf(p.hostNS, ifb))).To(Succeed()) }, nil),
		Entry("the ifb's tbf changed", func() { replaceTbf(p.hostNS, ifb, 1000, 0, 0) }, nil),
		Entry("the ifb down", func() { Expect(testutil.Handle(p.hostNS).LinkSetDown(link(ifb))).To(Succeed()) }, nil),
		Entry("the redirect deleted", func() {
			Expect(testutil.Handle(p.hostNS).FilterDel(&netlink.GenericFilter{FilterType: "u32", FilterAttrs: netlink.FilterAttrs{
				LinkIndex: link("veth-h").Attrs().Index, Parent: netlink.HANDLE_MIN_INGRESS, Priority: 0xffff, Protocol: unix.ETH_P_ALL}})).To(Succeed())
		}, nil),
		// Its redirect (to a link that is gone) is bandwidth's own: replaced.
		Entry("the ifb deleted", func() { Expect(testutil.Handle(p.hostNS).LinkDel(link(ifb))).To(Succeed()) }, []string{"del filter pref 65535"}),
	)

	It("ADD again with the result of the first as prevResult lists the ifb once", func() {
		out := p.must("ADD", conf("1.1.0", limits, prevFor("1.1.0", p.contNS, "veth-h")))
		again := p.must("ADD", conf("1.1.0", limits, out.Stdout))
		Expect(testutil.ParseResult("1.1.0", again.Stdout).Interfaces).To(Equal(testutil.ParseResult("1.1.0", out.Stdout).Interfaces))
		p.must("CHECK", conf("1.1.0", limits, again.Stdout))
	})

	// ADD leaves everything or nothing, also over a live attachment: a
	// failure after any step puts back the tbf it changed and deletes
	// nothing that was there.
	DescribeTable("a failure after each step of ADD over a live attachment leaves it as it was",
		func(step string) {
			add := conf("1.1.0", limits, prevFor("1.1.0", p.contNS, "veth-h"))
			p.must("ADD", add)
			replaceTbf(p.hostNS, "veth-h", 1000, 200_000, 0)
			replaceTbf(p.hostNS, ifb, 2000, 0, 0)
			before := shaping()
			for _, hook := range []func(string) error{testutil.FailAfter(step, nil), testutil.PanicAfter(step)} {
				Expect(p.run(attach.Hooks{AfterStep: hook}, "ADD", add).Err).NotTo(BeNil())
				Expect(shaping()).To(Equal(before))
			}
		}, testutil.StepEntries(bandwidth.AddSteps))

	// Issue 22 left a tbf 1: on the host end (an upstream DEL, a DEL
	// without prevResult): ADD takes it over; a later failure puts its
	// parameters back, not noqueue.
	DescribeTable("a failure after each step of ADD puts back a leftover tbf's parameters",
		func(step string) {
			h := testutil.Handle(p.hostNS)
			left := &netlink.Tbf{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: link("veth-h").Attrs().Index, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT},
				Rate: 1000, Buffer: 100000, Limit: 10000}
			Expect(h.QdiscAdd(left)).To(Succeed())
			was := tbfOf(p.hostNS, "veth-h")
			out := p.run(attach.Hooks{AfterStep: testutil.FailAfter(step, nil)}, "ADD", conf("1.1.0", limits, prevFor("1.1.0", p.contNS, "veth-h")))
			Expect(out.Err).NotTo(BeNil())
			Expect(tbfOf(p.hostNS, "veth-h")).To(Equal(was))
			Expect(testutil.LinkNames(p.hostNS)).NotTo(ContainElement(ifb))
		}, testutil.StepEntries(bandwidth.AddSteps))
})
