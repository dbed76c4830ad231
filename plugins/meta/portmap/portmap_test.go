package portmap_test

import (
	"fmt"
	"net"
	"os/exec"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/meta/portmap"
)

var backends = []TableEntry{Entry("iptables", "iptables"), Entry("nftables", "nftables")}

func hp(port int) string  { return net.JoinHostPort(hostIP4, fmt.Sprint(port)) }
func hp6(port int) string { return net.JoinHostPort(hostIP6, fmt.Sprint(port)) }

var _ = DescribeTableSubtree("on each backend", func(backend string) {
	var e env
	BeforeEach(func() { e = newEnv() })

	conf := func(ver string, ms ...mapping) []byte {
		return confOpts{ver: ver, backend: backend, mappings: ms, prev: e.prevResult(ver)}.json()
	}

	DescribeTable("ADD, CHECK, DEL, DEL with traffic from outside",
		func(ver string) {
			tcpServe(e.cont, ":8080", "from-container")
			udp := udpListen(e.cont, ":5353")
			stdin := conf(ver, mapping{HostPort: 80, ContainerPort: 8080}, mapping{HostPort: 53, ContainerPort: 5353, Protocol: "udp"})

			_, err := tcpGet(e.outside, hp(80))
			Expect(err).To(HaveOccurred(), "nothing forwards before ADD")

			out := run(e, attach.Hooks{}, call("ADD", "c1", e, stdin))
			Expect(out.Err).To(BeNil())
			res := testutil.ParseResult(ver, out.Stdout)
			Expect(res.IPs[0].Address.IP.String()).To(Equal(contIP4), "prevResult passes through")

			Expect(tcpGet(e.outside, hp(80))).To(Equal("from-container"))
			Expect(udp.send(e.outside, hp(53))).To(Equal("hello"))

			if testutil.AtLeast(ver, "0.4.0") {
				Expect(run(e, attach.Hooks{}, call("CHECK", "c1", e, stdin)).Err).To(BeNil())
			}
			Expect(run(e, attach.Hooks{}, call("DEL", "c1", e, stdin)).Err).To(BeNil())
			Expect(forwards(e.host)).To(BeEmpty())
			_, err = tcpGet(e.outside, hp(80))
			Expect(err).To(HaveOccurred(), "nothing forwards after DEL")
			Expect(run(e, attach.Hooks{}, call("DEL", "c1", e, stdin)).Err).To(BeNil())
		},
		testutil.VersionEntries(),
	)

	It("forwards 127.0.0.1:hostPort from the host", func() {
		tcpServe(e.cont, ":8080", "local")
		Expect(run(e, attach.Hooks{}, call("ADD", "c1", e, conf("1.1.0", mapping{HostPort: 80, ContainerPort: 8080}))).Err).To(BeNil())
		Expect(tcpGet(e.host, "127.0.0.1:80")).To(Equal("local"))
		Expect(tcpGet(e.host, hp(80))).To(Equal("local"))
	})

	It("answers a container reaching its own host port (hairpin)", func() {
		tcpServe(e.cont, ":8080", "hairpin")
		Expect(run(e, attach.Hooks{}, call("ADD", "c1", e, conf("1.1.0", mapping{HostPort: 80, ContainerPort: 8080}))).Err).To(BeNil())
		Expect(tcpGet(e.cont, hp(80))).To(Equal("hairpin"))
	})

	// Found by the Podman lane (scripts/podman-lane.sh): bridge's masquerade
	// chain, made before portmap runs, ACCEPTs traffic to the container's
	// subnet; CNI-HOSTPORT-MASQ appended after it was never reached.
	It("answers hairpin traffic behind bridge's masquerade rules (CNI-HOSTPORT-MASQ first in POSTROUTING)", func() {
		for _, c := range [][]string{
			{"-N", "CNI-bridgemasq"},
			{"-A", "CNI-bridgemasq", "-d", "10.88.0.0/24", "-j", "ACCEPT"},
			{"-A", "CNI-bridgemasq", "!", "-d", "224.0.0.0/4", "-j", "MASQUERADE"},
			{"-A", "POSTROUTING", "-s", contIP4 + "/32", "-j", "CNI-bridgemasq"},
		} {
			ipt(e.host, append([]string{"iptables", "-t", "nat"}, c...)...)
		}
		tcpServe(e.cont, ":8080", "hairpin")
		Expect(run(e, attach.Hooks{}, call("ADD", "c1", e, conf("1.1.0", mapping{HostPort: 80, ContainerPort: 8080}))).Err).To(BeNil())
		Expect(tcpGet(e.cont, hp(80))).To(Equal("hairpin"))
	})

	// Issue 22: a prevResult whose address the host cannot route yet (a
	// plugin that routes later, another node agent). As upstream, ADD skips
	// route_localnet and succeeds; every other path works once the route is
	// there.
	It("accepts a container address the host cannot route yet, skipping route_localnet", func() {
		hh := testutil.Handle(e.host)
		link, err := hh.LinkByName(hostIf)
		Expect(err).NotTo(HaveOccurred())
		subnet := &net.IPNet{IP: net.ParseIP("10.88.0.0").To4(), Mask: net.CIDRMask(24, 32)}
		Expect(hh.RouteDel(&netlink.Route{LinkIndex: link.Attrs().Index, Dst: subnet, Scope: netlink.SCOPE_LINK})).To(Succeed())
		tcpServe(e.cont, ":8080", "routed-later")
		stdin := conf("1.1.0", mapping{HostPort: 80, ContainerPort: 8080})
		out := run(e, attach.Hooks{}, call("ADD", "c1", e, stdin))
		Expect(out.Err).To(BeNil())
		Expect(ipt(e.host, "sysctl", "-n", "net.ipv4.conf."+hostIf+".route_localnet")).To(Equal("0\n"))

		Expect(hh.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Dst: subnet, Scope: netlink.SCOPE_LINK})).To(Succeed())
		Expect(tcpGet(e.outside, hp(80))).To(Equal("routed-later"))
		Expect(tcpGet(e.outside, hp6(80))).To(Equal("routed-later"))
		Expect(tcpGet(e.cont, hp(80))).To(Equal("routed-later"), "hairpin")
		Expect(tcpGet(e.host, hp(80))).To(Equal("routed-later"), "from the host to its own address")
		Expect(run(e, attach.Hooks{}, call("CHECK", "c1", e, stdin)).Err).To(BeNil())
		Expect(run(e, attach.Hooks{}, call("DEL", "c1", e, stdin)).Err).To(BeNil())
		Expect(forwards(e.host)).To(BeEmpty())
	})

	It("restricts a mapping with hostIP to that address", func() {
		tcpServe(e.cont, ":8080", "restricted")
		Expect(run(e, attach.Hooks{}, call("ADD", "c1", e, conf("1.1.0", mapping{HostPort: 80, ContainerPort: 8080, HostIP: hostIP4}))).Err).To(BeNil())
		Expect(tcpGet(e.outside, hp(80))).To(Equal("restricted"))
		_, err := tcpGet(e.outside, net.JoinHostPort(otherIP4, "80"))
		Expect(err).To(HaveOccurred(), "another host address is not forwarded")
	})

	It("forwards IPv6 mappings to the IPv6 address, and an IPv4 hostIP only over IPv4", func() {
		tcpServe(e.cont, ":8080", "six")
		stdin := conf("1.1.0", mapping{HostPort: 80, ContainerPort: 8080}, mapping{HostPort: 81, ContainerPort: 8080, HostIP: hostIP4})
		Expect(run(e, attach.Hooks{}, call("ADD", "c1", e, stdin)).Err).To(BeNil())
		Expect(tcpGet(e.outside, hp6(80))).To(Equal("six"))
		Expect(tcpGet(e.outside, hp(81))).To(Equal("six"))
		_, err := tcpGet(e.outside, hp6(81))
		Expect(err).To(HaveOccurred())
		Expect(run(e, attach.Hooks{}, call("CHECK", "c1", e, stdin)).Err).To(BeNil())
	})

	// CVE-2025-67499: a packet to port P of another address, merely
	// forwarded through the host, is not rewritten.
	It("does not DNAT transit traffic to another address's port", func() {
		far := testutil.NewNS()
		Expect(testutil.ConnectNS(
			testutil.VethEnd{NS: e.host, Name: "far0", Addrs: []string{"10.77.0.1/24"}},
			testutil.VethEnd{NS: far, Name: "eth0", Addrs: []string{"10.77.0.2/24"}},
		)).To(Succeed())
		Expect(exec.Command("ip", "-n", nsName(far), "route", "add", "default", "via", "10.77.0.1").Run()).To(Succeed())
		Expect(exec.Command("ip", "-n", nsName(e.outside), "route", "add", "10.77.0.0/24", "via", testutil.OutsideHostAddr).Run()).To(Succeed())
		tcpServe(far, ":80", "far")
		tcpServe(e.cont, ":8080", "container")
		Expect(run(e, attach.Hooks{}, call("ADD", "c1", e, conf("1.1.0", mapping{HostPort: 80, ContainerPort: 8080}))).Err).To(BeNil())
		Expect(tcpGet(e.outside, "10.77.0.2:80")).To(Equal("far"))
		Expect(tcpGet(e.outside, hp(80))).To(Equal("container"))
	})

	// CVE-2020-8558: route_localnet must not open the host's
	// localhost-only listeners to a neighbour.
	It("drops a neighbour's packet to 127.0.0.1 despite route_localnet", func() {
		local := udpListen(e.host, "127.0.0.1:9999")
		Expect(run(e, attach.Hooks{}, call("ADD", "c1", e, conf("1.1.0", mapping{HostPort: 80, ContainerPort: 8080}))).Err).To(BeNil())
		Expect(ipt(e.host, "sysctl", "-n", "net.ipv4.conf."+hostIf+".route_localnet")).To(Equal("1\n"))
		// The container plays the neighbour: it sends to 127.0.0.1 over
		// its link to the host.
		ipt(e.cont, "ip", "route", "del", "local", "127.0.0.0/8", "dev", "lo", "table", "local")
		ipt(e.cont, "ip", "route", "del", "local", "127.0.0.1", "dev", "lo", "table", "local")
		ipt(e.cont, "ip", "route", "add", "127.0.0.0/8", "via", hostGW4)
		ipt(e.cont, "sysctl", "-qw", "net.ipv4.conf.eth0.route_localnet=1")
		Expect(local.send(e.cont, "127.0.0.1:9999")).To(BeEmpty())
		// The control: without the guard, the same packet gets in.
		if backend == "iptables" {
			ipt(e.host, "iptables", "-t", "raw", "-D", "PREROUTING", "-j", "CNI-HOSTPORT-GUARD")
		} else {
			ipt(e.host, "nft", "flush", "chain", "ip", "cni_hostport", "localnet_guard")
		}
		Expect(local.send(e.cont, "127.0.0.1:9999")).To(Equal("hello"))
	})

	It("flushes the UDP conntrack entry of a flow that started before ADD", func() {
		udp := udpListen(e.cont, ":5353")
		// A node tracks connections and has NAT in use before portmap runs
		// (a firewall, a masquerade): conntrack and the nat hooks see the
		// early flow and bind it to "no NAT" for its life, unless its entry
		// is flushed. (A fresh namespace tracks nothing until a rule needs
		// conntrack.)
		ipt(e.host, "iptables", "-t", "nat", "-A", "PREROUTING", "-d", "192.0.2.1/32", "-j", "RETURN")
		ipt(e.host, "iptables", "-A", "INPUT", "-m", "conntrack", "--ctstate", "NEW,ESTABLISHED", "-j", "ACCEPT")
		// The flow starts before ADD, to a listener of the host's own. (Not
		// to a closed port: the kernel kills an unreplied UDP entry on the
		// port-unreachable answer, and the spec would prove nothing.)
		onHost := udpListen(e.host, hostIP4+":53")
		c := dialFromOutside(e, 40000, hostIP4+":53")
		_, err := c.Write([]byte("early"))
		Expect(err).NotTo(HaveOccurred())
		Expect(onHost.recv()).To(Equal("early"))

		Expect(run(e, attach.Hooks{}, call("ADD", "c1", e, conf("1.1.0", mapping{HostPort: 53, ContainerPort: 5353, Protocol: "udp"}))).Err).To(BeNil())
		// The same socket (same 5-tuple, same conntrack entry) now reaches
		// the container.
		for range 3 {
			_, err = c.Write([]byte("later"))
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(udp.recv()).To(Equal("later"))
	})

	It("flushes on DEL the flows DNATed to the container, so they stop reaching it", func() {
		ipt(e.host, "iptables", "-A", "INPUT", "-m", "conntrack", "--ctstate", "NEW,ESTABLISHED", "-j", "ACCEPT")
		inCont := udpListen(e.cont, ":5353")
		stdin := conf("1.1.0", mapping{HostPort: 53, ContainerPort: 5353, Protocol: "udp"})
		Expect(run(e, attach.Hooks{}, call("ADD", "c1", e, stdin)).Err).To(BeNil())
		c := dialFromOutside(e, 40001, hostIP4+":53")
		send := func(msg string) {
			for range 3 {
				_, err := c.Write([]byte(msg))
				Expect(err).NotTo(HaveOccurred())
			}
		}
		send("during")
		Expect(inCont.recv()).To(Equal("during"))
		Expect(run(e, attach.Hooks{}, call("DEL", "c1", e, stdin)).Err).To(BeNil())
		// The host now answers the flow itself: its entry was flushed.
		onHost := udpListen(e.host, hostIP4+":53")
		send("after")
		Expect(onHost.recv()).To(Equal("after"))
		Expect(inCont.recv()).To(BeEmpty())
	})

	It("replaces an attachment's mappings on a repeated ADD, and ADD-DEL-ADD ends as ADD", func() {
		tcpServe(e.cont, ":8080", "again")
		first := conf("1.1.0", mapping{HostPort: 80, ContainerPort: 8080})
		Expect(run(e, attach.Hooks{}, call("ADD", "c1", e, first)).Err).To(BeNil())
		state := forwards(e.host)
		Expect(run(e, attach.Hooks{}, call("DEL", "c1", e, first)).Err).To(BeNil())
		Expect(run(e, attach.Hooks{}, call("ADD", "c1", e, first)).Err).To(BeNil())
		Expect(forwards(e.host)).To(Equal(state))

		second := conf("1.1.0", mapping{HostPort: 81, ContainerPort: 8080})
		Expect(run(e, attach.Hooks{}, call("ADD", "c1", e, second)).Err).To(BeNil())
		Expect(tcpGet(e.outside, hp(81))).To(Equal("again"))
		_, err := tcpGet(e.outside, hp(80))
		Expect(err).To(HaveOccurred(), "the old mapping is gone")
		Expect(run(e, attach.Hooks{}, call("CHECK", "c1", e, second)).Err).To(BeNil())
	})

	It("answers STATUS: fine when the backend works, code 50 when it cannot be used", func() {
		status := testutil.Call{Command: "STATUS", Stdin: confOpts{ver: "1.1.0", backend: backend}.json()}
		Expect(run(e, attach.Hooks{}, status).Err).To(BeNil())
		if backend == "iptables" {
			status.Env = map[string]string{"PATH": "/nonexistent"} // no iptables binaries
			out := run(e, attach.Hooks{}, status)
			testutil.ExpectCode(out, 50)
		}
	})

	It("DEL removes the forwards with a config that no longer validates", func() {
		// A config edited between ADD and DEL must not keep the ports
		// forwarded for good (issue 22).
		tcpServe(e.cont, ":8080", "edited")
		Expect(run(e, attach.Hooks{}, call("ADD", "c1", e, conf("1.1.0", mapping{HostPort: 80, ContainerPort: 8080}))).Err).To(BeNil())
		Expect(forwards(e.host)).NotTo(BeEmpty())
		edited := confOpts{ver: "1.1.0", backend: backend, prev: e.prevResult("1.1.0"),
			mappings: []mapping{{HostPort: 80, ContainerPort: 8080}, {HostPort: 0, ContainerPort: 1}},
			extra:    map[string]any{"markMasqBit": 40}}.json()
		out := run(e, attach.Hooks{}, call("ADD", "c2", e, edited))
		testutil.ExpectCode(out, types.ErrInvalidNetworkConfig, "ADD still refuses it")
		Expect(run(e, attach.Hooks{}, call("DEL", "c1", e, edited)).Err).To(BeNil())
		Expect(forwards(e.host)).To(BeEmpty())
		_, err := tcpGet(e.outside, hp(80))
		Expect(err).To(HaveOccurred(), "nothing forwards after DEL")
		Expect(run(e, attach.Hooks{}, call("DEL", "c1", e, edited)).Err).To(BeNil())
	})

	It("GC removes the forwards of attachments not listed", func() {
		stdin := conf("1.1.0", mapping{HostPort: 80, ContainerPort: 8080})
		Expect(run(e, attach.Hooks{}, call("ADD", "keep", e, stdin)).Err).To(BeNil())
		Expect(run(e, attach.Hooks{}, call("ADD", "gone", e, conf("1.1.0", mapping{HostPort: 81, ContainerPort: 8080}))).Err).To(BeNil())
		gc := []byte(fmt.Sprintf(`{"cniVersion":"1.1.0","name":%q,"type":"portmap","cni.dev/valid-attachments":[{"containerID":"keep","ifname":"eth0"}]}`, netName))
		Expect(run(e, attach.Hooks{}, testutil.Call{Command: "GC", Stdin: gc}).Err).To(BeNil())
		fw := forwards(e.host)
		Expect(fw).NotTo(BeEmpty())
		Expect(fmt.Sprint(fw)).To(ContainSubstring("keep"))
		Expect(fmt.Sprint(fw)).NotTo(ContainSubstring("gone"))
		Expect(run(e, attach.Hooks{}, call("CHECK", "keep", e, stdin)).Err).To(BeNil())
	})

	It("fails CHECK when a mapping's rules are missing", func() {
		stdin := conf("1.1.0", mapping{HostPort: 80, ContainerPort: 8080})
		Expect(run(e, attach.Hooks{}, call("ADD", "c1", e, stdin)).Err).To(BeNil())
		Expect(run(e, attach.Hooks{}, call("CHECK", "c1", e, conf("1.1.0", mapping{HostPort: 80, ContainerPort: 8080}, mapping{HostPort: 82, ContainerPort: 8080}))).Err).NotTo(BeNil())
		Expect(run(e, attach.Hooks{}, call("DEL", "c1", e, stdin)).Err).To(BeNil())
		Expect(run(e, attach.Hooks{}, call("CHECK", "c1", e, stdin)).Err).NotTo(BeNil())
	})

	// check --repair, podman's network reload and a runtime's second ADD
	// land on a live attachment: a failure later in that ADD must not take
	// the running pod's forwards away (its undo used to tear down every
	// rule of the owner).
	DescribeTable("a repeated ADD over a live attachment that fails after a step keeps its forwards",
		func(step string) {
			tcpServe(e.cont, ":8080", "live")
			stdin := conf("1.1.0", mapping{HostPort: 80, ContainerPort: 8080}, mapping{HostPort: 53, ContainerPort: 53, Protocol: "udp"})
			Expect(run(e, attach.Hooks{}, call("ADD", "c1", e, stdin)).Err).To(BeNil())
			before := ruleState(e.host)
			Expect(forwards(e.host)).NotTo(BeEmpty())

			out := run(e, attach.Hooks{AfterStep: testutil.FailAfter(step, nil)}, call("ADD", "c1", e, stdin))
			Expect(out.Err).NotTo(BeNil())
			Expect(ruleState(e.host)).To(Equal(before), "every rule the first ADD made is still there")
			Expect(tcpGet(e.outside, hp(80))).To(Equal("live"))
			Expect(run(e, attach.Hooks{}, call("CHECK", "c1", e, stdin)).Err).To(BeNil())
		},
		testutil.StepEntries(portmap.AddSteps),
	)

	It("keeps what drift left when a repair ADD fails late: the rules that were there stay", func() {
		tcpServe(e.cont, ":8080", "drifted")
		stdin := conf("1.1.0", mapping{HostPort: 80, ContainerPort: 8080}, mapping{HostPort: 53, ContainerPort: 53, Protocol: "udp"})
		Expect(run(e, attach.Hooks{}, call("ADD", "c1", e, stdin)).Err).To(BeNil())
		// Drift: the UDP mapping's forward goes.
		if backend == "iptables" {
			var rule string
			for _, l := range strings.Split(ipt(e.host, "iptables-save", "-t", "nat"), "\n") {
				if strings.HasPrefix(l, "-A CNI-DN-") && strings.Contains(l, "--dport 53 ") && strings.Contains(l, "-j DNAT") {
					rule = l
				}
			}
			Expect(rule).NotTo(BeEmpty())
			ipt(e.host, append([]string{"iptables", "-w", "-t", "nat", "-D"}, strings.Fields(strings.TrimPrefix(rule, "-A "))...)...)
		} else {
			ipt(e.host, "nft", "delete", "element", "ip", "cni_hostport", "hostports_map", "{ udp . 53 }")
		}
		drifted := ruleState(e.host)
		Expect(run(e, attach.Hooks{}, call("CHECK", "c1", e, stdin)).Err).NotTo(BeNil(), "drift CHECK sees")

		out := run(e, attach.Hooks{AfterStep: testutil.FailAfter(portmap.StepConntrack, nil)}, call("ADD", "c1", e, stdin))
		Expect(out.Err).NotTo(BeNil())
		Expect(ruleState(e.host)).To(Equal(drifted), "the rules that were there stay, the missing one stays missing")
		Expect(tcpGet(e.outside, hp(80))).To(Equal("drifted"))
	})

	DescribeTable("a failure after each ADD step leaves no rule, and route_localnet as it was",
		func(step string) {
			localnet := "net.ipv4.conf." + hostIf + ".route_localnet"
			Expect(ipt(e.host, "sysctl", "-n", localnet)).To(Equal("0\n"))
			hooks := attach.Hooks{AfterStep: testutil.FailAfter(step, nil)}
			out := run(e, hooks, call("ADD", "c1", e, conf("1.1.0", mapping{HostPort: 80, ContainerPort: 8080}, mapping{HostPort: 53, ContainerPort: 53, Protocol: "udp"})))
			Expect(out.Err).NotTo(BeNil())
			Expect(forwards(e.host)).To(BeEmpty())
			Expect(ipt(e.host, "sysctl", "-n", localnet)).To(Equal("0\n"))
		},
		testutil.StepEntries(portmap.AddSteps),
	)
}, backends)

var _ = Describe("without mappings", func() {
	It("touches no netfilter state and execs nothing", func() {
		e := newEnv()
		before := netfilterState(e.host)
		noPath := map[string]string{"PATH": "/nonexistent"}
		for _, cmd := range []string{"ADD", "CHECK", "DEL"} {
			c := call(cmd, "c1", e, confOpts{ver: "1.1.0", prev: e.prevResult("1.1.0")}.json())
			c.Env = noPath
			Expect(run(e, attach.Hooks{}, c).Err).To(BeNil(), cmd)
		}
		Expect(netfilterState(e.host)).To(Equal(before))
		// The control: with a mapping, the iptables backend needs its binaries.
		c := call("ADD", "c1", e, confOpts{ver: "1.1.0", backend: "iptables", mappings: []mapping{{HostPort: 80, ContainerPort: 80}}, prev: e.prevResult("1.1.0")}.json())
		c.Env = noPath
		Expect(run(e, attach.Hooks{}, c).Err).NotTo(BeNil())
	})
})

var _ = Describe("bad input", func() {
	var e env
	BeforeEach(func() { e = newEnv() })
	DescribeTable("is refused with its code, nothing created",
		func(stdin func() []byte, code uint) {
			before := netfilterState(e.host)
			out := run(e, attach.Hooks{}, call("ADD", "c1", e, stdin()))
			testutil.ExpectCode(out, code, out.Err.Error())
			Expect(netfilterState(e.host)).To(Equal(before))
		},
		Entry("no prevResult", func() []byte {
			return confOpts{ver: "1.1.0", mappings: []mapping{{HostPort: 80, ContainerPort: 80}}}.json()
		}, types.ErrInvalidNetworkConfig),
		Entry("no prevResult, no mappings", func() []byte { return confOpts{ver: "1.1.0"}.json() }, types.ErrInvalidNetworkConfig),
		Entry("not JSON", func() []byte { return []byte("{") }, types.ErrDecodingFailure),
		Entry("unknown version", func() []byte { return confOpts{ver: "9.9.9"}.json() }, types.ErrIncompatibleCNIVersion),
		Entry("port out of range", func() []byte {
			return confOpts{ver: "1.1.0", mappings: []mapping{{HostPort: 70000, ContainerPort: 80}}, prev: e.prevResult("1.1.0")}.json()
		}, types.ErrInvalidNetworkConfig),
		Entry("bad protocol", func() []byte {
			return confOpts{ver: "1.1.0", mappings: []mapping{{HostPort: 80, ContainerPort: 80, Protocol: "icmp"}}, prev: e.prevResult("1.1.0")}.json()
		}, types.ErrInvalidNetworkConfig),
		Entry("bad backend", func() []byte {
			return confOpts{ver: "1.1.0", backend: "ebpf", mappings: []mapping{{HostPort: 80, ContainerPort: 80}}, prev: e.prevResult("1.1.0")}.json()
		}, types.ErrInvalidNetworkConfig),
	)
})
