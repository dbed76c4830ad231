package hostport

import (
	"net"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
)

// The same for portmap: the attachment's CNI-DN chain and its entries in
// CNI-HOSTPORT-DNAT go over netlink, and the DNAT addresses it returns
// for the conntrack flush are the ones iptables-save would give.
var _ = Describe("iptables-nft portmap teardown over netlink", func() {
	opts := func(id string, ips ...string) PortMapOptions {
		o := PortMapOptions{Owner: netfilter.Owner{Network: "n", ContainerID: id, IfName: "eth0"}, SNAT: true,
			MarkMasqBit: DefaultMarkMasqBit, Mappings: append(manyMappings(20, 20000),
				PortMapping{HostPort: 53, ContainerPort: 5353, Protocol: "udp", HostIP: net.ParseIP("192.168.1.1")})}
		for _, ip := range ips {
			o.ContainerIPs = append(o.ContainerIPs, net.IPNet{IP: net.ParseIP(ip)})
		}
		return o
	}

	It("deletes an attachment's chains and entries, IPv4 and IPv6, with no process, and returns its DNAT addresses", func() {
		fast, slow := testutil.NewNS(), testutil.NewNS()
		a, b := opts("ctr-a", "10.1.0.5", "fd00:1::5"), opts("ctr-b", "10.1.0.6", "fd00:1::6")
		b.Mappings = manyMappings(3, 30000)
		for _, n := range []*ns.NetNS{fast, slow} {
			for _, o := range []PortMapOptions{a, b} {
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
	opts := func(id string, ips ...string) PortMapOptions {
		o := PortMapOptions{Owner: netfilter.Owner{Network: "n", ContainerID: id, IfName: "eth0"}, SNAT: true,
			MarkMasqBit: DefaultMarkMasqBit, Mappings: []PortMapping{
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
	setup := func(o PortMapOptions, prepare func(n *ns.NetNS)) []string {
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
	add := func(os ...PortMapOptions) func(n *ns.NetNS) {
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
