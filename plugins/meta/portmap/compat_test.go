package portmap_test

import (
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"os/exec"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

// ipt runs iptables (or ip6tables) in n with args, as a shell would.
func ipt(n *ns.NetNS, args ...string) string {
	GinkgoHelper()
	out, err := exec.Command("ip", append([]string{"netns", "exec", nsName(n)}, args...)...).CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "%v: %s", args, out)
	return string(out)
}

func upstreamChain(network, id string) string {
	sum := sha512.Sum512([]byte(network + id))
	return "CNI-DN-" + hex.EncodeToString(sum[:])[:21]
}

// upstreamADD makes, with single iptables calls in upstream's argument
// order, the rules upstream's portmap ADD makes for one TCP mapping
// 80 -> contIP4:8080 with snat (its default).
func upstreamADD(n *ns.NetNS, id string) {
	GinkgoHelper()
	// The container's address with its prefix: iptables keeps the network.
	hairpinADD(n, id, contIP4+"/24")
}

// hairpinADD is upstreamADD with the hairpin mark's source hairpinSrc.
func hairpinADD(n *ns.NetNS, id, hairpinSrc string) {
	GinkgoHelper()
	chain := upstreamChain(netName, id)
	comment := fmt.Sprintf(`dnat name: "%s" id: "%s"`, netName, id)
	for _, c := range [][]string{
		{"-N", "CNI-HOSTPORT-SETMARK"},
		{"-A", "CNI-HOSTPORT-SETMARK", "-m", "comment", "--comment", "CNI portfwd masquerade mark", "-j", "MARK", "--set-xmark", "0x2000/0x2000"},
		{"-N", "CNI-HOSTPORT-MASQ"},
		{"-A", "CNI-HOSTPORT-MASQ", "-m", "mark", "--mark", "0x2000/0x2000", "-j", "MASQUERADE"},
		{"-I", "POSTROUTING", "1", "-m", "comment", "--comment", "CNI portfwd requiring masquerade", "-j", "CNI-HOSTPORT-MASQ"},
		{"-N", "CNI-HOSTPORT-DNAT"},
		{"-A", "PREROUTING", "-m", "addrtype", "--dst-type", "LOCAL", "-j", "CNI-HOSTPORT-DNAT"},
		{"-A", "OUTPUT", "-m", "addrtype", "--dst-type", "LOCAL", "-j", "CNI-HOSTPORT-DNAT"},
		{"-N", chain},
		{"-A", chain, "-p", "tcp", "--dport", "80", "-s", hairpinSrc, "-j", "CNI-HOSTPORT-SETMARK"},
		{"-A", chain, "-p", "tcp", "--dport", "80", "-s", "127.0.0.1", "-j", "CNI-HOSTPORT-SETMARK"},
		{"-A", chain, "-p", "tcp", "--dport", "80", "-j", "DNAT", "--to-destination", contIP4 + ":8080"},
		{"-A", "CNI-HOSTPORT-DNAT", "-m", "comment", "--comment", comment, "-m", "multiport", "-p", "tcp", "--destination-ports", "80", "-j", chain},
	} {
		out, err := exec.Command("ip", append([]string{"netns", "exec", nsName(n), "iptables", "-t", "nat"}, c...)...).CombinedOutput()
		if err != nil && !strings.Contains(string(out), "exists") {
			Fail(fmt.Sprintf("%v: %v: %s", c, err, out))
		}
	}
}

// upstreamDEL does what upstream's portmap DEL does: delete the entry
// rules that jump to the container's chain, then flush and delete it.
func upstreamDEL(n *ns.NetNS, id string) {
	GinkgoHelper()
	chain := upstreamChain(netName, id)
	for _, tool := range []string{"iptables", "ip6tables"} {
		for _, l := range strings.Split(ipt(n, tool, "-t", "nat", "-S", "CNI-HOSTPORT-DNAT"), "\n") {
			if strings.HasSuffix(l, "-j "+chain) {
				// The comment holds spaces and quotes: let a shell split it.
				ipt(n, "sh", "-c", tool+" -t nat "+strings.Replace(l, "-A ", "-D ", 1))
			}
		}
		ipt(n, tool, "-t", "nat", "-F", chain)
		ipt(n, tool, "-t", "nat", "-X", chain)
	}
}

var _ = Describe("upstream compatibility (iptables)", func() {
	var e env
	BeforeEach(func() { e = newEnv() })
	conf := func(ms ...mapping) []byte {
		// IPv4 only: upstreamADD emulates the IPv4 half.
		return confOpts{ver: "1.1.0", backend: "iptables", mappings: ms, prev: e.prevResultV4("1.1.0")}.json()
	}

	It("makes upstream's exact rules", func() {
		Expect(run(e, attach.Hooks{}, call("ADD", "c1", e, conf(mapping{HostPort: 80, ContainerPort: 8080}))).Err).To(BeNil())
		ours := ipt(e.host, "iptables-save", "-t", "nat")
		other := newEnv()
		upstreamADD(other.host, "c1")
		theirs := ipt(other.host, "iptables-save", "-t", "nat")
		pick := func(s string) []string {
			var out []string
			for _, l := range strings.Split(s, "\n") {
				if strings.Contains(l, "CNI-") {
					out = append(out, l)
				}
			}
			return out
		}
		Expect(pick(ours)).To(ConsistOf(pick(theirs)))
	})

	It("checks, forwards through and deletes an upstream ADD's rules", func() {
		tcpServe(e.cont, ":8080", "upstream")
		upstreamADD(e.host, "c1")
		stdin := conf(mapping{HostPort: 80, ContainerPort: 8080})
		Expect(run(e, attach.Hooks{}, call("CHECK", "c1", e, stdin)).Err).To(BeNil())
		Expect(tcpGet(e.outside, hp(80))).To(Equal("upstream"))
		Expect(run(e, attach.Hooks{}, call("DEL", "c1", e, stdin)).Err).To(BeNil())
		Expect(forwards(e.host)).To(BeEmpty())
	})

	It("with masqAll, marks with one rule as upstream (v1.9.1 on): -s 0.0.0.0/0, which iptables prints without -s", func() {
		stdin := confOpts{ver: "1.1.0", backend: "iptables", mappings: []mapping{{HostPort: 80, ContainerPort: 8080}},
			prev: e.prevResultV4("1.1.0"), extra: map[string]any{"masqAll": true}}.json()
		Expect(run(e, attach.Hooks{}, call("ADD", "c1", e, stdin)).Err).To(BeNil())
		chain := upstreamChain(netName, "c1")
		Expect(ipt(e.host, "iptables", "-t", "nat", "-S", chain)).To(Equal("-N " + chain + "\n" +
			"-A " + chain + " -p tcp -m tcp --dport 80 -j CNI-HOSTPORT-SETMARK\n" +
			"-A " + chain + " -p tcp -m tcp --dport 80 -j DNAT --to-destination " + contIP4 + ":8080\n"))
		Expect(run(e, attach.Hooks{}, call("CHECK", "c1", e, stdin)).Err).To(BeNil())
	})

	It("checks and deletes the /32 hairpin mark cniforge wrote before issue 22", func() {
		hairpinADD(e.host, "c1", contIP4+"/32")
		stdin := conf(mapping{HostPort: 80, ContainerPort: 8080})
		Expect(run(e, attach.Hooks{}, call("CHECK", "c1", e, stdin)).Err).To(BeNil())
		Expect(run(e, attach.Hooks{}, call("DEL", "c1", e, stdin)).Err).To(BeNil())
		Expect(forwards(e.host)).To(BeEmpty())
	})

	It("GC collects an upstream ADD's rules of an attachment not listed", func() {
		upstreamADD(e.host, "gone")
		gc := []byte(fmt.Sprintf(`{"cniVersion":"1.1.0","name":%q,"type":"portmap","cni.dev/valid-attachments":[]}`, netName))
		Expect(run(e, attach.Hooks{}, call("GC", "", e, gc)).Err).To(BeNil())
		Expect(forwards(e.host)).To(BeEmpty())
	})

	It("leaves nothing of ours after an upstream DEL", func() {
		stdin := confOpts{ver: "1.1.0", backend: "iptables", prev: e.prevResult("1.1.0"),
			mappings: []mapping{{HostPort: 80, ContainerPort: 8080}, {HostPort: 53, ContainerPort: 53, Protocol: "udp"}}}.json()
		Expect(run(e, attach.Hooks{}, call("ADD", "c1", e, stdin)).Err).To(BeNil())
		upstreamDEL(e.host, "c1")
		Expect(forwards(e.host)).To(BeEmpty())
	})

	// CVE-2019-9946: the entry rules are appended, never put in front of
	// the administrator's.
	It("lets an administrator's earlier rule win", func() {
		tcpServe(e.cont, ":8080", "container")
		tcpServe(e.host, hostIP4+":80", "admin")
		ipt(e.host, "iptables", "-t", "nat", "-A", "PREROUTING", "-p", "tcp", "--dport", "80", "-j", "RETURN")
		Expect(run(e, attach.Hooks{}, call("ADD", "c1", e, conf(mapping{HostPort: 80, ContainerPort: 8080}))).Err).To(BeNil())
		Expect(tcpGet(e.outside, hp(80))).To(Equal("admin"))
	})
})

var _ = Describe("upstream compatibility (nftables)", func() {
	It("checks and deletes the hairpin element cniforge added before issue 22 (container . container), in a table of then", func() {
		e := newEnv()
		stdin := confOpts{ver: "1.1.0", backend: "nftables", mappings: []mapping{{HostPort: 80, ContainerPort: 8080}},
			prev: e.prevResult("1.1.0")}.json()
		Expect(run(e, attach.Hooks{}, call("ADD", "c1", e, stdin)).Err).To(BeNil())
		sum := sha512.Sum512([]byte(netName + "c1"))
		comment := fmt.Sprintf(`"%s, net: %s, id: c1"`, hex.EncodeToString(sum[:])[:16], netName)
		// The table as cniforge made it before: no hairpin_nets, no
		// masquerading_nets; the hairpin element container . container.
		for _, fam := range []string{"ip", "ip6"} {
			ipt(e.host, "nft", "delete", "chain", fam, "cni_hostport", "masquerading_nets")
			ipt(e.host, "nft", "delete", "set", fam, "cni_hostport", "hairpin_nets")
		}
		for _, f := range []struct{ fam, ip string }{{"ip", contIP4}, {"ip6", contIP6}} {
			ipt(e.host, "nft", "add", "element", f.fam, "cni_hostport", "hairpin", "{", f.ip+" . "+f.ip, "comment", comment, "}")
		}
		Expect(run(e, attach.Hooks{}, call("CHECK", "c1", e, stdin)).Err).To(BeNil())
		tcpServe(e.cont, ":8080", "old-table")
		Expect(tcpGet(e.cont, hp(80))).To(Equal("old-table"), "hairpin through the old element")

		// The next ADD brings the table up to date.
		c2 := confOpts{ver: "1.1.0", backend: "nftables", mappings: []mapping{{HostPort: 81, ContainerPort: 8080}},
			prev: e.prevResult("1.1.0")}.json()
		Expect(run(e, attach.Hooks{}, call("ADD", "c2", e, c2)).Err).To(BeNil())
		Expect(ipt(e.host, "nft", "list", "chain", "ip", "cni_hostport", "masquerading_nets")).To(ContainSubstring("@hairpin_nets"))
		Expect(run(e, attach.Hooks{}, call("CHECK", "c2", e, c2)).Err).To(BeNil())
		Expect(run(e, attach.Hooks{}, call("CHECK", "c1", e, stdin)).Err).To(BeNil())
		Expect(run(e, attach.Hooks{}, call("DEL", "c1", e, stdin)).Err).To(BeNil())
		Expect(run(e, attach.Hooks{}, call("DEL", "c2", e, c2)).Err).To(BeNil())
		Expect(forwards(e.host)).To(BeEmpty())
	})

	// Upstream's nftables backend (v1.5 on) writes one rule per mapping in
	// the shared chains, no elements: CHECK accepts them (issue 22).
	It("CHECK accepts upstream's per-mapping rules, IPv4 and IPv6, and fails when one is missing; DEL removes them", func() {
		e := newEnv()
		conf := func(id string, ms ...mapping) []byte {
			return confOpts{ver: "1.1.0", backend: "nftables", mappings: ms, prev: e.prevResult("1.1.0")}.json()
		}
		other := conf("other", mapping{HostPort: 90, ContainerPort: 8080})
		Expect(run(e, attach.Hooks{}, call("ADD", "other", e, other)).Err).To(BeNil())
		for _, r := range [][]string{
			{"ip", "hostports", "tcp", "dport", "80", "dnat", "to", contIP4 + ":8080", "comment", `"c1"`},
			{"ip", "hostip_hostports", "ip", "daddr", hostIP4, "tcp", "dport", "81", "dnat", "to", contIP4 + ":8080", "comment", `"c1"`},
			{"ip", "masquerading", "ip", "saddr", contIP4, "ip", "daddr", contIP4, "masquerade", "comment", `"c1"`},
			{"ip", "masquerading", "ip", "saddr", "127.0.0.1", "ip", "daddr", contIP4, "masquerade", "comment", `"c1"`},
			{"ip6", "hostports", "tcp", "dport", "80", "dnat", "to", "[" + contIP6 + "]:8080", "comment", `"c1"`},
			{"ip6", "masquerading", "ip6", "saddr", contIP6, "ip6", "daddr", contIP6, "masquerade", "comment", `"c1"`},
		} {
			ipt(e.host, append([]string{"nft", "add", "rule", r[0], "cni_hostport"}, r[1:]...)...)
		}
		tcpServe(e.cont, ":8080", "upstream-nft")
		stdin := conf("c1", mapping{HostPort: 80, ContainerPort: 8080}, mapping{HostPort: 81, ContainerPort: 8080, HostIP: hostIP4})
		Expect(run(e, attach.Hooks{}, call("CHECK", "c1", e, stdin)).Err).To(BeNil())
		Expect(tcpGet(e.outside, hp(80))).To(Equal("upstream-nft"))
		Expect(tcpGet(e.outside, hp6(80))).To(Equal("upstream-nft"))
		Expect(tcpGet(e.outside, hp(81))).To(Equal("upstream-nft"))
		more := conf("c1", mapping{HostPort: 80, ContainerPort: 8080}, mapping{HostPort: 82, ContainerPort: 8080})
		Expect(run(e, attach.Hooks{}, call("CHECK", "c1", e, more)).Err).NotTo(BeNil(), "port 82 has no rule")
		Expect(run(e, attach.Hooks{}, call("DEL", "c1", e, stdin)).Err).To(BeNil())
		Expect(run(e, attach.Hooks{}, call("CHECK", "c1", e, stdin)).Err).NotTo(BeNil())
		Expect(run(e, attach.Hooks{}, call("CHECK", "other", e, other)).Err).To(BeNil())
	})

	It("DEL removes upstream's per-mapping rules, commented with the container ID", func() {
		e := newEnv()
		stdin := confOpts{ver: "1.1.0", backend: "nftables", mappings: []mapping{{HostPort: 80, ContainerPort: 8080}},
			prev: e.prevResultV4("1.1.0")}.json()
		Expect(run(e, attach.Hooks{}, call("ADD", "other", e, stdin)).Err).To(BeNil())
		// Upstream's rules for container c1 in the shared chains.
		for _, r := range [][]string{
			{"hostports", "tcp", "dport", "81", "dnat", "to", contIP4 + ":8080", "comment", `"c1"`},
			{"hostip_hostports", "ip", "daddr", hostIP4, "tcp", "dport", "82", "dnat", "to", contIP4 + ":8080", "comment", `"c1"`},
			{"masquerading", "ip", "saddr", contIP4, "ip", "daddr", contIP4, "masquerade", "comment", `"c1"`},
		} {
			ipt(e.host, append([]string{"nft", "add", "rule", "ip", "cni_hostport"}, r...)...)
		}
		Expect(ipt(e.host, "nft", "list", "table", "ip", "cni_hostport")).To(ContainSubstring(`comment "c1"`))
		Expect(run(e, attach.Hooks{}, call("DEL", "c1", e, stdin)).Err).To(BeNil())
		Expect(ipt(e.host, "nft", "list", "table", "ip", "cni_hostport")).NotTo(ContainSubstring(`comment "c1"`))
		Expect(run(e, attach.Hooks{}, call("CHECK", "other", e, stdin)).Err).To(BeNil(), "another container's mappings stay")
	})
})

// runUpstream runs upstream's portmap in n (the stand-in host) with cmd
// (testutil.RunUpstream: the spec fails without it).
func runUpstream(n *ns.NetNS, e env, cmd, id string, stdin []byte) {
	GinkgoHelper()
	testutil.RunUpstream(n, "portmap", testutil.NewCall(cmd, id, "eth0", e.cont, stdin))
}

var _ = Describe("upstream compatibility (Debian's upstream 1.1.1 binary)", func() {
	It("CHECK and DEL accept what upstream's ADD made, IPv4 and IPv6, and the forwards work in between", func() {
		e := newEnv()
		tcpServe(e.cont, ":8080", "by-upstream")
		stdin := confOpts{ver: "1.0.0", backend: "", prev: e.prevResult("1.0.0"), mappings: []mapping{
			// 1.1.1 has no default protocol.
			{HostPort: 80, ContainerPort: 8080, Protocol: "tcp"}, {HostPort: 53, ContainerPort: 5353, Protocol: "udp"},
			{HostPort: 81, ContainerPort: 8080, Protocol: "tcp", HostIP: hostIP4},
		}}.json()
		runUpstream(e.host, e, "ADD", "c1", stdin)
		Expect(tcpGet(e.outside, hp(80))).To(Equal("by-upstream"))
		Expect(tcpGet(e.outside, hp6(80))).To(Equal("by-upstream"))
		Expect(tcpGet(e.cont, hp(80))).To(Equal("by-upstream"), "hairpin")

		Expect(run(e, attach.Hooks{}, call("CHECK", "c1", e, stdin)).Err).To(BeNil())
		Expect(run(e, attach.Hooks{}, call("DEL", "c1", e, stdin)).Err).To(BeNil())
		Expect(forwards(e.host)).To(BeEmpty())
		_, err := tcpGet(e.outside, hp(80))
		Expect(err).To(HaveOccurred(), "nothing forwards after our DEL")
		Expect(run(e, attach.Hooks{}, call("DEL", "c1", e, stdin)).Err).To(BeNil())
	})
})
