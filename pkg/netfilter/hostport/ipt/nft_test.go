package ipt

import (
	"net"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/hostport"
	"github.com/cniforge/plugins/pkg/netfilter/hostport/internal/pmtest"
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

// On iptables-nft, a portmap Setup that finds the shared chains in place
// and its own chain absent writes that chain and its entries over netlink
// (setupNFT). Whatever reads them (iptables-save, iptables -C and -D, nft)
// must not be able to tell them from iptables-restore's.
var _ = Describe("iptables-nft port forwards written over netlink", func() {
	opts := pmtest.PortMapOpts
	pm := func(m *iptables.Runner) *iptablesPortMap { return &iptablesPortMap{m: m} }

	// seeded returns a namespace whose nat (and raw) tables hold another
	// attachment's forwards, made by iptables-restore, with snat as given.
	seeded := func(snat bool) *ns.NetNS {
		GinkgoHelper()
		n := testutil.NewNS()
		seed := opts("ctr-seed", snat, pmtest.ManyMappings(2, 30000), "10.9.0.5", "fd00:9::5")
		Expect(nftest.In(n, func() error { return pm(nftest.ViaRestore()).Setup(seed) })).To(Succeed())
		return n
	}

	listings := func(n *ns.NetNS) string { GinkgoHelper(); return nftest.NftListings(n) }

	DescribeTable("writes exactly what iptables-restore writes, with no process",
		func(snat bool, mappings []hostport.PortMapping, ips ...string) {
			a := opts("ctr-a", snat, mappings, ips...)
			viaRestore, viaNetlink := seeded(snat), seeded(snat)
			Expect(nftest.In(viaRestore, func() error { return pm(nftest.ViaRestore()).Setup(a) })).To(Succeed())
			var calls []string
			Expect(nftest.In(viaNetlink, func() error { return pm(nftest.Counting(&calls)).Setup(a) })).To(Succeed())
			Expect(calls).To(BeEmpty(), "no iptables process")
			Expect(listings(viaNetlink)).To(Equal(listings(viaRestore)))
			chain := pmChain(a.Owner)
			Expect(listings(viaNetlink)).To(ContainSubstring(chain))

			// iptables finds every rule by its spec, as upstream's DEL
			// deletes the entries.
			nftest.CheckEachBySpec(viaNetlink, "nat", func(l string) bool { return strings.Contains(l, chain) })
			calls = nil
			Expect(nftest.In(viaNetlink, func() error { return pm(nftest.Counting(&calls)).Check(a) })).To(Succeed())
			Expect(calls).To(BeEmpty(), "Check finds every rule over netlink")
			for _, n := range []*ns.NetNS{viaNetlink, viaRestore} {
				Expect(nftest.In(n, func() error { _, err := pm(&iptables.Runner{Variant: "nft"}).Teardown(a.Owner); return err })).To(Succeed())
			}
			Expect(listings(viaNetlink)).NotTo(ContainSubstring(chain))
			Expect(listings(viaNetlink)).To(Equal(listings(viaRestore)))
		},
		Entry("snat, one tcp mapping, IPv4 (Kubernetes' hostPort)", true,
			[]hostport.PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}}, "10.1.0.5"),
		Entry("snat, dual stack, tcp and udp, one with a host IP", true,
			[]hostport.PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}, {HostPort: 5353, ContainerPort: 53, Protocol: "udp"},
				{HostPort: 8443, ContainerPort: 443, Protocol: "tcp", HostIP: net.ParseIP("192.168.1.1")}}, "10.1.0.5", "fd00:1::5"),
		Entry("no snat, 20 ports (two entries)", false, pmtest.ManyMappings(20, 20000), "10.1.0.5"),
	)

	It("leaves a first Setup, which makes the shared chains, to iptables-restore", func() {
		var calls []string
		n := testutil.NewNS()
		a := opts("ctr-a", true, []hostport.PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}}, "10.1.0.5")
		Expect(nftest.In(n, func() error { return pm(nftest.Counting(&calls)).Setup(a) })).To(Succeed())
		Expect(calls).To(ContainElement("iptables-nft-restore"))
	})

	It("leaves a repeated Setup, whose chain exists, to iptables-save and changes nothing", func() {
		n := seeded(true)
		a := opts("ctr-a", true, []hostport.PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}}, "10.1.0.5")
		Expect(nftest.In(n, func() error { return pm(&iptables.Runner{Variant: "nft"}).Setup(a) })).To(Succeed())
		before := listings(n)
		var calls []string
		Expect(nftest.In(n, func() error { return pm(nftest.Counting(&calls)).Setup(a) })).To(Succeed())
		Expect(calls).To(ContainElement("iptables-nft-save"))
		Expect(listings(n)).To(Equal(before), "no rule twice")
	})
})

// On iptables-nft, portmap's Check reads the nat chains over netlink
// (checkNFT) and starts iptables-save only when something is missing or
// cannot be encoded. It must accept exactly what the iptables-save path
// accepts.
var _ = Describe("iptables-nft portmap Check over netlink", func() {
	opts := pmtest.PortMapOpts
	pm := func(m *iptables.Runner) *iptablesPortMap { return &iptablesPortMap{m: m} }

	// natRules lists n's nat rules that are a's or shared, per tool: not
	// the other attachment's (ctr-b).
	natRules := func(n *ns.NetNS, a hostport.PortMapOptions) map[string][]string {
		GinkgoHelper()
		return nftest.SavedRules(n, "nat", func(l string) bool {
			return strings.Contains(l, "CNI-") && !strings.Contains(l, pmChain(netfilter.Owner{Network: "n", ContainerID: "ctr-b"}))
		})
	}

	DescribeTable("agrees with iptables-save, rule by rule",
		func(snat bool, mappings []hostport.PortMapping, ips ...string) {
			n := testutil.NewNS()
			a := opts("ctr-a", snat, mappings, ips...)
			b := opts("ctr-b", snat, pmtest.ManyMappings(2, 30000), "10.1.0.6", "fd00:1::6")
			for _, o := range []hostport.PortMapOptions{b, a} {
				Expect(nftest.In(n, func() error { return newIPTablesPortMap().Setup(o) })).To(Succeed())
			}
			nftest.DeleteEach(n, "nat", natRules(n, a), func(m *iptables.Runner) error { return pm(m).Check(a) })
		},
		Entry("snat, dual stack, tcp and udp, one with a host IP", true,
			[]hostport.PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"},
				{HostPort: 53, ContainerPort: 5353, Protocol: "udp", HostIP: net.ParseIP("192.168.1.1")}},
			"10.1.0.5", "fd00:1::5"),
		Entry("no snat, IPv4", false, []hostport.PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}}, "10.1.0.5"),
		Entry("20 ports: two multiport entries", true, pmtest.ManyMappings(20, 20000), "10.1.0.5"),
	)

	It("asks iptables-save about a mapping it cannot encode (sctp), and passes as it does", func() {
		n := testutil.NewNS()
		a := opts("ctr-a", true, []hostport.PortMapping{{HostPort: 9000, ContainerPort: 90, Protocol: "sctp"}}, "10.1.0.5")
		Expect(nftest.In(n, func() error { return newIPTablesPortMap().Setup(a) })).To(Succeed())
		var calls []string
		Expect(nftest.In(n, func() error { return pm(nftest.Counting(&calls)).Check(a) })).To(Succeed())
		Expect(calls).To(Equal([]string{"iptables-nft-save"}))
	})
})

func TestIPTSpecExprsRefuses(t *testing.T) {
	for _, spec := range []string{
		"-p tcp -m tcp --dport 80 -j DNAT --to-destination 10.1.0.5:80 --random",
		"-p tcp -m tcp --dport 80:90 -j DNAT --to-destination 10.1.0.5:80",
		"-p sctp -m sctp --dport 80 -j X",
		"-p tcp -m multiport --dports 80:90 -j X",
		"-p tcp -m tcp --sport 80 -j X",
		"-s 10.1.0.5/32 -p tcp",
		`-m comment --comment "unterminated -j X`,
		"-p tcp -m tcp --dport 80 -j DNAT --to-destination [fd00::5]:80", // IPv6 target in IPv4
	} {
		if _, ok := iptSpecExprs(nftnl.IPv4, spec); ok {
			t.Errorf("iptSpecExprs(%q) encoded", spec)
		}
	}
	if _, ok := iptSpecExprs(nftnl.IPv4, `-p tcp -m comment --comment "dnat name: \"n\" id: \"c\"" -m multiport --dports 80,443 -j CNI-DN-x`); !ok {
		t.Error("an entry is not encoded")
	}
}

// pmtest.PortMapOpts is the port forwarding of container id (network "n", eth0)
// with mappings, at ips (an IPv4 address in a /24, an IPv6 one in a /64).
// Teardown: the attachment's CNI-DN chain and its entries in
// CNI-HOSTPORT-DNAT go over netlink, and the DNAT addresses it returns
// for the conntrack flush are the ones iptables-save would give.
var _ = Describe("iptables-nft portmap teardown over netlink", func() {
	opts := func(id string, ips ...string) hostport.PortMapOptions {
		o := hostport.PortMapOptions{Owner: netfilter.Owner{Network: "n", ContainerID: id, IfName: "eth0"}, SNAT: true,
			MarkMasqBit: hostport.DefaultMarkMasqBit, Mappings: append(pmtest.ManyMappings(20, 20000),
				hostport.PortMapping{HostPort: 53, ContainerPort: 5353, Protocol: "udp", HostIP: net.ParseIP("192.168.1.1")})}
		for _, ip := range ips {
			o.ContainerIPs = append(o.ContainerIPs, net.IPNet{IP: net.ParseIP(ip)})
		}
		return o
	}

	It("deletes an attachment's chains and entries, IPv4 and IPv6, with no process, and returns its DNAT addresses", func() {
		fast, slow := testutil.NewNS(), testutil.NewNS()
		a, b := opts("ctr-a", "10.1.0.5", "fd00:1::5"), opts("ctr-b", "10.1.0.6", "fd00:1::6")
		b.Mappings = pmtest.ManyMappings(3, 30000)
		for _, n := range []*ns.NetNS{fast, slow} {
			for _, o := range []hostport.PortMapOptions{a, b} {
				Expect(nftest.In(n, func() error { return newIPTablesPortMap().Setup(o) })).To(Succeed())
			}
		}
		var calls []string
		pm := newIPTablesPortMap()
		pm.m.Run = nftest.CountingRun(&calls)
		pm.m.Variant = "nft"
		var fastIPs, slowIPs []net.IP
		Expect(nftest.In(fast, func() (err error) { fastIPs, err = pm.Teardown(a.Owner); return })).To(Succeed())
		Expect(calls).To(BeEmpty())
		old := newIPTablesPortMap()
		old.m.NoNFT, old.m.Variant = true, "nft"
		Expect(nftest.In(slow, func() (err error) { slowIPs, err = old.Teardown(a.Owner); return })).To(Succeed())
		Expect(fastIPs).To(ConsistOf(net.ParseIP("10.1.0.5"), net.ParseIP("fd00:1::5")))
		Expect(fastIPs).To(ConsistOf(slowIPs))
		for _, save := range []string{"iptables-nft-save", "ip6tables-nft-save"} {
			nat := testutil.NetfilterOutput(fast, save, "-t", "nat")
			Expect(nat).To(Equal(testutil.NetfilterOutput(slow, save, "-t", "nat")), save)
			Expect(nat).NotTo(ContainSubstring(pmChain(a.Owner)))
			Expect(nat).To(ContainSubstring(pmChain(b.Owner)), "the other attachment's chain stays")
		}
	})
})

// portmap's ADD on iptables-nft reads the shared chains and jumps over
// netlink instead of with iptables-save: one process per family (the
// restore) at most, none beside another attachment, and the same tables
// as the iptables-save path leaves, also when an administrator removed a
// shared part. A repeated ADD (the
// attachment's chain exists) still reads with iptables-save.
var _ = Describe("iptables-nft portmap setup read over netlink", func() {
	opts := func(id string, ips ...string) hostport.PortMapOptions {
		o := hostport.PortMapOptions{Owner: netfilter.Owner{Network: "n", ContainerID: id, IfName: "eth0"}, SNAT: true,
			MarkMasqBit: hostport.DefaultMarkMasqBit, Mappings: []hostport.PortMapping{
				{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"},
				{HostPort: 53, ContainerPort: 5353, Protocol: "udp", HostIP: net.ParseIP("192.168.1.1")}}}
		for _, ip := range ips {
			o.ContainerIPs = append(o.ContainerIPs, net.IPNet{IP: net.ParseIP(ip)})
		}
		return o
	}
	a, b := opts("ctr-a", "10.1.0.5", "fd00:1::5"), opts("ctr-b", "10.1.0.6", "fd00:1::6")

	// setup runs Setup(o) on the node prepare makes, once with the netlink
	// read and once without it, each on a namespace of its own, and
	// returns the processes the netlink run started. Both namespaces must
	// end up with the same ruleset.
	setup := func(o hostport.PortMapOptions, prepare func(n *ns.NetNS)) []string {
		GinkgoHelper()
		fast, slow := testutil.NewNS(), testutil.NewNS()
		prepare(fast)
		prepare(slow)
		var calls []string
		pm := newIPTablesPortMap()
		pm.m.Variant = "nft"
		pm.m.Run = nftest.CountingRun(&calls)
		Expect(nftest.In(fast, func() error { return pm.Setup(o) })).To(Succeed())
		old := newIPTablesPortMap()
		old.m.NoNFT, old.m.Variant = true, "nft"
		Expect(nftest.In(slow, func() error { return old.Setup(o) })).To(Succeed())
		for _, save := range []string{"iptables-nft-save", "ip6tables-nft-save"} {
			got := testutil.NetfilterOutput(fast, save)
			Expect(got).To(Equal(testutil.NetfilterOutput(slow, save)), save)
			Expect(got).To(ContainSubstring(pmChain(o.Owner)))
		}
		return calls
	}
	add := func(os ...hostport.PortMapOptions) func(n *ns.NetNS) {
		return func(n *ns.NetNS) {
			for _, o := range os {
				pm := newIPTablesPortMap()
				pm.m.Variant = "nft"
				Expect(nftest.In(n, func() error { return pm.Setup(o) })).To(Succeed())
			}
		}
	}
	restoreOnly := []string{"iptables-nft-restore", "ip6tables-nft-restore"}

	It("makes the first attachment's shared chains with one process per family", func() {
		Expect(setup(a, func(*ns.NetNS) {})).To(Equal(restoreOnly))
	})

	It("adds beside another attachment with no process (setupNFT writes over netlink too)", func() {
		Expect(setup(b, add(a))).To(BeEmpty())
	})

	It("puts back the shared jumps and chains an administrator removed", func() {
		Expect(setup(b, func(n *ns.NetNS) {
			add(a)(n)
			for _, args := range [][]string{
				{"iptables-nft", "-t", "nat", "-D", "PREROUTING", "-m", "addrtype", "--dst-type", "LOCAL", "-j", pmDNATChain},
				{"iptables-nft", "-t", "nat", "-D", "POSTROUTING", "-m", "comment", "--comment", "CNI portfwd requiring masquerade", "-j", pmMasqChain},
				{"iptables-nft", "-t", "nat", "-F", pmMasqChain},
				{"iptables-nft", "-t", "nat", "-X", pmMasqChain},
				{"iptables-nft", "-t", "raw", "-D", "PREROUTING", "-j", pmGuardChain},
				{"ip6tables-nft", "-t", "nat", "-D", "OUTPUT", "-m", "addrtype", "--dst-type", "LOCAL", "-j", pmDNATChain},
			} {
				testutil.NetfilterOutput(n, args...)
			}
		})).To(Equal(restoreOnly))
	})

	It("reads with iptables-save when the attachment's chain exists (a repeated ADD)", func() {
		Expect(setup(a, add(a, b))).To(Equal([]string{"iptables-nft-save", "ip6tables-nft-save"}))
	})
})
