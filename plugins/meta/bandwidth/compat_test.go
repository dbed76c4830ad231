package bandwidth_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/meta/bandwidth"
)

// runUpstream runs upstream's bandwidth in hostNS with cmd and returns
// what it printed (testutil.RunUpstream: the spec fails without it).
func runUpstream(hostNS, contNS *ns.NetNS, cmd string, stdin []byte) []byte {
	GinkgoHelper()
	return testutil.RunUpstream(hostNS, "bandwidth", testutil.NewCall(cmd, "ctr1", "eth0", contNS, stdin))
}

var _ = Describe("upstream compatibility (Debian's upstream 1.1.1 binary)", func() {
	p := usePair()
	// state is what either suite could leave in the host: links, qdiscs,
	// filters on the host end's ingress hook (over netlink).
	state := func() []string {
		return append(testutil.LinkNames(p.hostNS), hooks(p.hostNS, "veth-h")...)
	}

	DescribeTable("CHECK and DEL accept what upstream's ADD made",
		func(keys string) {
			before := state()
			res := runUpstream(p.hostNS, p.contNS, "ADD", conf("1.0.0", keys, prevFor("1.0.0", p.contNS, "veth-h")))
			p.must("CHECK", conf("1.0.0", keys, res))
			p.must("DEL", conf("1.0.0", keys, res))
			Expect(state()).To(Equal(before))
			Expect(qdiscKinds(p.hostNS, "veth-h")).NotTo(ContainElement("tbf"))
		},
		// Upstream truncates the burst to whole microseconds, then ticks.
		Entry("limits whose burst is no whole number of microseconds", `"ingressRate": 3000000, "ingressBurst": 333333, "egressRate": 7000000, "egressBurst": 123457`),
		Entry("containerd's burst at 100 Mbit/s", `"runtimeConfig": {"bandwidth": {"ingressRate": 100000000, "ingressBurst": 4294967295, "egressRate": 100000000, "egressBurst": 4294967295}}`),
		// Upstream's tick count wraps past 32 bits where ours clamps.
		Entry("containerd's burst at 10 Mbit/s", `"runtimeConfig": {"bandwidth": {"ingressRate": 10000000, "ingressBurst": 4294967295, "egressRate": 10000000, "egressBurst": 4294967295}}`),
	)

	// Issue 22, defect 12, with upstream itself: its DEL deletes only the
	// ifb and leaves the tbf, the ingress qdisc and a dead redirect.
	It("ADD works on a host end that upstream's ADD and DEL left, and DEL then leaves it clean", func() {
		prev := prevFor("1.0.0", p.contNS, "veth-h")
		res := runUpstream(p.hostNS, p.contNS, "ADD", conf("1.0.0", limits, prev))
		runUpstream(p.hostNS, p.contNS, "DEL", conf("1.0.0", limits, res))
		Expect(qdiscKinds(p.hostNS, "veth-h")).To(ContainElements("tbf", "ingress"), "what upstream's DEL leaves")
		out := p.must("ADD", conf("1.0.0", limits, prev))
		Expect(testutil.Ping(p.contNS, hostAddr)).To(Succeed())
		p.must("CHECK", conf("1.0.0", limits, out.Stdout))
		p.must("DEL", conf("1.0.0", limits, out.Stdout))
		Expect(qdiscKinds(p.hostNS, "veth-h")).NotTo(ContainElements("tbf"))
		Expect(qdiscKinds(p.hostNS, "veth-h")).NotTo(ContainElements("ingress"))
	})

	// `cniforge check --repair` on a node that switched suites runs our
	// ADD over upstream's attachment: it keeps upstream's tbfs (their
	// parameters are CHECK's too), ifb, ingress qdisc and redirect at
	// priority 1, deleting nothing.
	It("ADD over an attachment upstream's ADD made keeps it as it is", func() {
		prev := prevFor("1.0.0", p.contNS, "veth-h")
		res := runUpstream(p.hostNS, p.contNS, "ADD", conf("1.0.0", limits, prev))
		ifb := bandwidth.IfbName(netName, "ctr1")
		was := []string{tbfOf(p.hostNS, "veth-h"), tbfOf(p.hostNS, ifb), fmt.Sprint(redirectsTo(p.hostNS, "veth-h", ifb))}
		Expect(qdiscKinds(p.hostNS, "veth-h")).To(ContainElement("ingress"))
		seen := deletions(p.hostNS)
		out := p.must("ADD", conf("1.0.0", limits, prev))
		Expect(seen()).To(BeEmpty())
		Expect([]string{tbfOf(p.hostNS, "veth-h"), tbfOf(p.hostNS, ifb), fmt.Sprint(redirectsTo(p.hostNS, "veth-h", ifb))}).To(Equal(was))
		Expect(redirectsTo(p.hostNS, "veth-h", ifb)).To(Equal([]uint16{1}))
		p.must("CHECK", conf("1.0.0", limits, out.Stdout))
		p.must("CHECK", conf("1.0.0", limits, res))
	})
})

// qdiscsOf lists link's qdiscs in n, over netlink.
func qdiscsOf(n *ns.NetNS, link string) []netlink.Qdisc {
	GinkgoHelper()
	h := testutil.Handle(n)
	l, err := h.LinkByName(link)
	Expect(err).NotTo(HaveOccurred())
	qs, err := h.QdiscList(l)
	Expect(err).NotTo(HaveOccurred())
	return qs
}

// qdiscKinds lists the kinds of link's qdiscs in n, over netlink.
func qdiscKinds(n *ns.NetNS, link string) []string {
	GinkgoHelper()
	var kinds []string
	for _, q := range qdiscsOf(n, link) {
		kinds = append(kinds, q.Type())
	}
	return kinds
}
