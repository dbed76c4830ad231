package bandwidth_test

import (
	"encoding/binary"
	"fmt"
	"net"
	"runtime"
	"sort"
	"unsafe"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/meta/bandwidth"
)

// otherTool stands in for an eBPF agent on the host end: it makes (or
// shares, with replace, as such agents do) a clsact, and attaches BPF
// programs (direct action) to both hooks at priority 1, as Cilium does: on
// the ingress hook (what the container sends) one answering ingress, and
// at priority 2 an observer letting every packet go on (TC_ACT_UNSPEC); on
// the egress hook one passing every packet (TC_ACT_OK). (This kernel has
// neither matchall nor gact: CONFIG_NET_CLS_MATCHALL, CONFIG_NET_ACT_GACT.)
func otherTool(n *ns.NetNS, link string, ingress netlink.TcAct) {
	GinkgoHelper()
	h := testutil.Handle(n)
	l, err := h.LinkByName(link)
	Expect(err).NotTo(HaveOccurred())
	idx := l.Attrs().Index
	Expect(h.QdiscReplace(&netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: idx, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_INGRESS}})).To(Succeed())
	for _, f := range []struct {
		hook    uint32
		prio    uint16
		name    string
		verdict netlink.TcAct
	}{
		{netlink.HANDLE_MIN_INGRESS, 1, "agent-in", ingress},
		{netlink.HANDLE_MIN_INGRESS, 2, "observer", netlink.TC_ACT_UNSPEC},
		{netlink.HANDLE_MIN_EGRESS, 1, "agent-out", netlink.TC_ACT_OK},
	} {
		fd := loadProg(int32(f.verdict))
		Expect(h.FilterAdd(&netlink.BpfFilter{
			FilterAttrs: netlink.FilterAttrs{LinkIndex: idx, Parent: f.hook, Priority: f.prio, Handle: 1, Protocol: unix.ETH_P_ALL},
			Fd:          fd, Name: f.name, DirectAction: true,
		})).To(Succeed())
		Expect(unix.Close(fd)).To(Succeed()) // the filter holds the program
	}
}

// loadProg loads a sched_cls BPF program "r0 = verdict; exit".
func loadProg(verdict int32) int {
	GinkgoHelper()
	insns := make([]byte, 16)
	insns[0] = 0xb7 // BPF_ALU64 | BPF_MOV | BPF_K, into r0
	binary.LittleEndian.PutUint32(insns[4:], uint32(verdict))
	insns[8] = 0x95 // BPF_JMP | BPF_EXIT
	license := []byte("GPL\x00")
	var attr [128]byte // union bpf_attr, BPF_PROG_LOAD's fields
	binary.LittleEndian.PutUint32(attr[0:], unix.BPF_PROG_TYPE_SCHED_CLS)
	binary.LittleEndian.PutUint32(attr[4:], 2) // instructions
	binary.LittleEndian.PutUint64(attr[8:], uint64(uintptr(unsafe.Pointer(&insns[0]))))
	binary.LittleEndian.PutUint64(attr[16:], uint64(uintptr(unsafe.Pointer(&license[0]))))
	fd, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_LOAD, uintptr(unsafe.Pointer(&attr[0])), uintptr(len(attr)))
	runtime.KeepAlive(insns)
	runtime.KeepAlive(license)
	Expect(errno).To(BeZero(), "BPF_PROG_LOAD")
	return int(fd)
}

// hooks describes the qdisc at ffff: and every filter on both hooks of
// link in n, except bandwidth's (u32), read over netlink.
func hooks(n *ns.NetNS, link string) []string {
	GinkgoHelper()
	h := testutil.Handle(n)
	l, err := h.LinkByName(link)
	Expect(err).NotTo(HaveOccurred())
	var out []string
	qs, err := h.QdiscList(l)
	Expect(err).NotTo(HaveOccurred())
	for _, q := range qs {
		if q.Attrs().Parent == netlink.HANDLE_INGRESS {
			out = append(out, "qdisc "+q.Type())
		}
	}
	for _, hook := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
		fs, err := h.FilterList(l, hook)
		if err != nil {
			continue // no clsact
		}
		for _, f := range fs {
			if f.Type() == "u32" {
				continue
			}
			a := f.Attrs()
			d := fmt.Sprintf("%x %s pref %d handle %x", hook, f.Type(), a.Priority, a.Handle)
			if b, ok := f.(*netlink.BpfFilter); ok {
				d += fmt.Sprintf(" %s direct-action %v id %d", b.Name, b.DirectAction, b.Id)
			}
			out = append(out, d)
		}
	}
	sort.Strings(out)
	return out
}

// sendUDP sends n datagrams from n to addr's discard port.
func sendUDP(from *ns.NetNS, addr string, n int) {
	GinkgoHelper()
	Expect(from.Do(func() error {
		// Unconnected: the port unreachable answers fail no write.
		c, err := net.ListenPacket("udp4", ":0")
		if err != nil {
			return err
		}
		defer c.Close()
		to := &net.UDPAddr{IP: net.ParseIP(addr), Port: 9}
		for range n {
			if _, err := c.WriteTo([]byte("bandwidth"), to); err != nil {
				return err
			}
		}
		return nil
	})).To(Succeed())
}

// tbfPackets is how many packets the root tbf of link in n has sent.
func tbfPackets(n *ns.NetNS, link string) uint32 {
	GinkgoHelper()
	t := rootTbf(n, link)
	Expect(t.Statistics).NotTo(BeNil())
	return t.Statistics.Basic.Packets
}

// Issue 23: eBPF agents attach a clsact to pod host veths. bandwidth
// shares it: its redirect goes last on the ingress hook (the agent's
// filters run first and their verdict stands), and DEL removes only its
// own filter, the clsact staying while the agent's filters are on it.
var _ = Describe("bandwidth beside another tool's clsact", func() {
	p := usePair()
	ifb := bandwidth.IfbName(netName, "ctr1")

	DescribeTable("ADD shapes both ways, CHECK passes, DEL leaves the tool's clsact and filters",
		func(before bool, ingress netlink.TcAct, shapedOut bool) {
			if before {
				otherTool(p.hostNS, "veth-h", ingress)
			}
			out := p.must("ADD", conf("1.1.0", limits, prevFor("1.1.0", p.contNS, "veth-h")))
			if !before {
				otherTool(p.hostNS, "veth-h", ingress)
			}
			theirs := hooks(p.hostNS, "veth-h")
			Expect(theirs).To(ContainElement("qdisc clsact"))
			Expect(theirs).To(HaveLen(4)) // the qdisc, 3 programs

			// 20 datagrams each way, counted by the tbf they pass (the host
			// stack may send a few packets of its own on each link: IPv6).
			in0, out0 := tbfPackets(p.hostNS, "veth-h"), tbfPackets(p.hostNS, ifb)
			sendUDP(p.hostNS, contAddr, 20)
			sendUDP(p.contNS, hostAddr, 20)
			Expect(tbfPackets(p.hostNS, "veth-h")-in0).To(BeNumerically(">=", 20), "into the container")
			if shapedOut {
				Expect(tbfPackets(p.hostNS, ifb)-out0).To(BeNumerically(">=", 20), "out of the container")
			} else {
				Expect(tbfPackets(p.hostNS, ifb)-out0).To(BeNumerically("<", 20), "the tool's verdict stands")
			}
			p.must("CHECK", conf("1.1.0", limits, out.Stdout))
			p.must("DEL", conf("1.1.0", limits, out.Stdout))
			Expect(hooks(p.hostNS, "veth-h")).To(Equal(theirs))
			Expect(ingressFilters(p.hostNS, "veth-h")).To(HaveLen(2), "only the tool's programs are left on the ingress hook")
			for _, q := range qdiscsOf(p.hostNS, "veth-h") {
				Expect(q.Type()).NotTo(Equal("tbf"))
			}
			Expect(testutil.LinkNames(p.hostNS)).NotTo(ContainElement(ifb))
			Expect(testutil.Ping(p.contNS, hostAddr)).To(Succeed())
		},
		Entry("its clsact made before ADD, its programs letting packets go on", true, netlink.TC_ACT_UNSPEC, true),
		Entry("its clsact added after ADD, its programs letting packets go on", false, netlink.TC_ACT_UNSPEC, true),
		Entry("its ingress program ending the packet's classification (TC_ACT_OK): its verdict stands, not shaped out", true, netlink.TC_ACT_OK, false),
	)

	DescribeTable("a failure after each step of ADD leaves the tool's clsact and programs, and nothing of bandwidth",
		func(step string) {
			otherTool(p.hostNS, "veth-h", netlink.TC_ACT_UNSPEC)
			state := func() []string {
				return append(append(testutil.LinkNames(p.hostNS), hooks(p.hostNS, "veth-h")...), qdiscKinds(p.hostNS, "veth-h")...)
			}
			before := state()
			for _, hook := range []func(string) error{testutil.FailAfter(step, nil), testutil.PanicAfter(step)} {
				out := testutil.RunIn(p.hostNS, bandwidth.New(attach.Hooks{AfterStep: hook}), testutil.Call{Command: "ADD", ContainerID: "ctr1", IfName: "eth0",
					Netns: p.contNS.Path(), Stdin: conf("1.1.0", limits, prevFor("1.1.0", p.contNS, "veth-h"))})
				Expect(out.Err).NotTo(BeNil())
				Expect(state()).To(Equal(before))
				Expect(ingressFilters(p.hostNS, "veth-h")).To(HaveLen(2), "no redirect of bandwidth's left")
			}
		}, testutil.StepEntries(bandwidth.AddSteps))
})
