package portmap_test

import (
	"encoding/json"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/attach"
)

// Issue 29: the rules every attachment shares (the entry jumps, the
// masquerade mark and its MASQUERADE, nftables' fixed rules) were made only
// with their chain. A flushed one passed CHECK, and the next ADD left it
// empty: no port forward on the node worked. CHECK names it, the next ADD
// of any pod puts it back, and the forward works again.
var _ = Describe("shared rules of port forwarding (issue 29)", func() {
	DescribeTable("a flushed shared chain fails CHECK, naming it; the next ADD restores it and traffic flows again",
		func(backend string, drift []string, named string, probe func(e env) (string, error)) {
			e := newEnv()
			conf := func(port int) []byte {
				return confOpts{ver: "1.1.0", backend: backend, mappings: []mapping{{HostPort: port, ContainerPort: 8080}},
					prev: e.prevResult("1.1.0")}.json()
			}
			// Another pod, at another address of the subnet.
			other := confOpts{ver: "1.1.0", backend: backend, mappings: []mapping{{HostPort: 81, ContainerPort: 8080}},
				prev: json.RawMessage(strings.NewReplacer(contIP4+"/", "10.88.0.9/", contIP6+"/", "fd88::9/").Replace(string(e.prevResult("1.1.0"))))}.json()
			tcpServe(e.cont, ":8080", "shared")
			Expect(run(e, attach.Hooks{}, call("ADD", "c1", e, conf(80))).Err).To(BeNil())
			Expect(probe(e)).To(Equal("shared"))

			ipt(e.host, drift...)
			out := run(e, attach.Hooks{}, call("CHECK", "c1", e, conf(80)))
			Expect(out.Err).NotTo(BeNil(), "CHECK after %v", drift)
			Expect(out.Err.Msg + out.Err.Details).To(ContainSubstring(named))

			Expect(run(e, attach.Hooks{}, call("ADD", "c2", e, other)).Err).To(BeNil())
			Expect(run(e, attach.Hooks{}, call("CHECK", "c1", e, conf(80))).Err).To(BeNil())
			Expect(run(e, attach.Hooks{}, call("CHECK", "c2", e, other)).Err).To(BeNil())
			Expect(probe(e)).To(Equal("shared"))
		},
		Entry("nftables: prerouting (from outside)", "nftables",
			[]string{"nft", "flush", "chain", "ip", "cni_hostport", "prerouting"}, "chain prerouting",
			func(e env) (string, error) { return tcpGet(e.outside, hp(80)) }),
		Entry("nftables: ip6 prerouting (from outside)", "nftables",
			[]string{"nft", "flush", "chain", "ip6", "cni_hostport", "prerouting"}, "chain prerouting",
			func(e env) (string, error) { return tcpGet(e.outside, hp6(80)) }),
		Entry("nftables: output (from the host)", "nftables",
			[]string{"nft", "flush", "chain", "ip", "cni_hostport", "output"}, "chain output",
			func(e env) (string, error) { return tcpGet(e.host, hp(80)) }),
		Entry("nftables: hostports (from outside)", "nftables",
			[]string{"nft", "flush", "chain", "ip", "cni_hostport", "hostports"}, "chain hostports",
			func(e env) (string, error) { return tcpGet(e.outside, hp(80)) }),
		Entry("nftables: masquerading_nets (hairpin)", "nftables",
			[]string{"nft", "flush", "chain", "ip", "cni_hostport", "masquerading_nets"}, "chain masquerading_nets",
			func(e env) (string, error) { return tcpGet(e.cont, hp(80)) }),
		Entry("nftables: masquerading (127.0.0.1 from the host)", "nftables",
			[]string{"nft", "flush", "chain", "ip", "cni_hostport", "masquerading"}, "chain masquerading",
			func(e env) (string, error) { return tcpGet(e.host, "127.0.0.1:80") }),
		Entry("iptables: CNI-HOSTPORT-SETMARK (hairpin)", "iptables",
			[]string{"iptables", "-t", "nat", "-F", "CNI-HOSTPORT-SETMARK"}, "CNI-HOSTPORT-SETMARK",
			func(e env) (string, error) { return tcpGet(e.cont, hp(80)) }),
		Entry("iptables: CNI-HOSTPORT-MASQ (hairpin)", "iptables",
			[]string{"iptables", "-t", "nat", "-F", "CNI-HOSTPORT-MASQ"}, "CNI-HOSTPORT-MASQ",
			func(e env) (string, error) { return tcpGet(e.cont, hp(80)) }),
		Entry("iptables: ip6 CNI-HOSTPORT-MASQ (hairpin)", "iptables",
			[]string{"ip6tables", "-t", "nat", "-F", "CNI-HOSTPORT-MASQ"}, "CNI-HOSTPORT-MASQ",
			func(e env) (string, error) { return tcpGet(e.cont, hp6(80)) }),
	)
})

// CRI-O runs CHECK after every ADD and at each start: a shared rule
// another tool wrote back in an equivalent form, or upstream's form of it,
// must pass, and the next ADD must not add ours beside it.
var _ = Describe("shared rules in another tool's form (issue 29)", func() {
	DescribeTable("CHECK passes and ADD adds nothing",
		func(backend string, rewrite func(e env), listing []string) {
			e := newEnv()
			conf := confOpts{ver: "1.1.0", backend: backend, mappings: []mapping{{HostPort: 80, ContainerPort: 8080}},
				prev: e.prevResult("1.1.0")}.json()
			tcpServe(e.cont, ":8080", "rewritten")
			Expect(run(e, attach.Hooks{}, call("ADD", "c1", e, conf)).Err).To(BeNil())
			rewrite(e)
			before := rulesOnly(ipt(e.host, listing...))
			Expect(run(e, attach.Hooks{}, call("CHECK", "c1", e, conf)).Err).To(BeNil())
			Expect(run(e, attach.Hooks{}, call("ADD", "c1", e, conf)).Err).To(BeNil())
			Expect(rulesOnly(ipt(e.host, listing...))).To(Equal(before))
			Expect(tcpGet(e.outside, hp(80))).To(Equal("rewritten"))
			Expect(tcpGet(e.cont, hp(80))).To(Equal("rewritten"), "hairpin")
		},
		Entry("nftables: the table listed and loaded again with nft -f", "nftables", func(e env) {
			table := ipt(e.host, "nft", "list", "table", "ip", "cni_hostport")
			ipt(e.host, "nft", "delete", "table", "ip", "cni_hostport")
			ipt(e.host, "sh", "-c", "printf '%s' \"$0\" | nft -f -", table)
		}, []string{"nft", "list", "table", "ip", "cni_hostport"}),
		Entry("nftables: upstream's prerouting and output, jumping to hostip_hostports and hostports", "nftables", func(e env) {
			for _, c := range []string{"prerouting", "output"} {
				ipt(e.host, "nft", "flush", "chain", "ip", "cni_hostport", c)
				ipt(e.host, "nft", "add", "rule", "ip", "cni_hostport", c, "fib", "daddr", "type", "local", "jump", "hostip_hostports")
				ipt(e.host, "nft", "add", "rule", "ip", "cni_hostport", c, "fib", "daddr", "type", "local", "jump", "hostports")
			}
		}, []string{"nft", "list", "table", "ip", "cni_hostport"}),
		Entry("iptables: the mark set with --or-mark and no comment", "iptables", func(e env) {
			ipt(e.host, "iptables", "-t", "nat", "-F", "CNI-HOSTPORT-SETMARK")
			ipt(e.host, "iptables", "-t", "nat", "-A", "CNI-HOSTPORT-SETMARK", "-j", "MARK", "--or-mark", "0x2000")
		}, []string{"iptables-save", "-t", "nat"}),
	)
})

// rulesOnly is a listing without what changes when no rule does:
// iptables-save's "# Generated ... on <time>" lines and the chains' packet
// and byte counters.
func rulesOnly(listing string) string {
	var b strings.Builder
	for _, l := range strings.Split(listing, "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		b.WriteString(counters.ReplaceAllString(l, "[-]"))
		b.WriteByte('\n')
	}
	return b.String()
}

var counters = regexp.MustCompile(`\[\d+:\d+\]`)
