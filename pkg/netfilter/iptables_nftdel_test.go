package netfilter

import (
	"fmt"
	"net"
	"os/exec"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

// The netlink teardown of iptables-nft rules must leave the nat table
// exactly as the iptables-save + iptables-restore path does, and take
// that path whenever the chain does not go as a whole.
var _ = Describe("iptables-nft teardown over netlink", func() {
	eth0 := Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
	eth1 := Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth1"}
	other := Owner{Network: "net1", ContainerID: "ctr-b", IfName: "eth0"}

	restoreText := func(n *ns.NetNS, tool, text string) {
		GinkgoHelper()
		Expect(in(n, func() error {
			cmd := exec.Command(tool, "--noflush")
			cmd.Stdin = strings.NewReader(text)
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
			return nil
		})).To(Succeed())
	}
	// upstream writes what upstream's bridge ADD leaves for o (no
	// markers), as iptables-save prints it.
	upstream := func(n *ns.NetNS, o Owner, ip, subnet string) {
		GinkgoHelper()
		chain, c := iptablesChain(o), saveQuote(iptablesComment(o))
		restoreText(n, "iptables-nft-restore", fmt.Sprintf("*nat\n:%[1]s - [0:0]\n"+
			"-A POSTROUTING -s %[3]s/32 -m comment --comment %[2]s -j %[1]s\n"+
			"-A %[1]s -d %[4]s -m comment --comment %[2]s -j ACCEPT\n"+
			"-A %[1]s ! -d 224.0.0.0/4 -m comment --comment %[2]s -j MASQUERADE\nCOMMIT\n", chain, c, ip, subnet))
	}
	setup := func(n *ns.NetNS, o Owner, cidrs ...string) {
		GinkgoHelper()
		m := &iptablesMasq{iptRunner: &iptRunner{variant: "nft"}}
		Expect(in(n, func() error { return m.Setup(o, mustCIDRs(cidrs...)) })).To(Succeed())
	}

	// teardown runs Teardown(o) on the node prepare makes, once with the
	// netlink path and once without it, each on a namespace of its own,
	// and returns the processes the netlink run started. The two nat
	// tables must end up the same.
	teardown := func(o Owner, prepare func(n *ns.NetNS)) []string {
		GinkgoHelper()
		fast, slow := testutil.NewNS(), testutil.NewNS()
		prepare(fast)
		prepare(slow)
		before := iptablesCase("nft").kernel(fast)
		Expect(before).To(ContainSubstring(iptablesChain(o)), "the node holds o's chain before the teardown")
		var calls []string
		m := &iptablesMasq{iptRunner: &iptRunner{variant: "nft", run: countingRun(&calls)}}
		Expect(in(fast, func() error { return m.Teardown(o) })).To(Succeed())
		Expect(in(slow, func() error { return (&iptablesMasq{iptRunner: &iptRunner{variant: "nft", noNFT: true}}).Teardown(o) })).To(Succeed())
		Expect(iptablesCase("nft").kernel(fast)).To(Equal(iptablesCase("nft").kernel(slow)))
		return calls
	}

	It("deletes an attachment's chain and jumps, IPv4 and IPv6, with no process", func() {
		calls := teardown(eth0, func(n *ns.NetNS) {
			setup(n, eth0, "10.1.0.5/24", "fd00:1::5/64")
			setup(n, other, "10.1.0.6/24", "fd00:1::6/64")
		})
		Expect(calls).To(BeEmpty())
	})

	It("deletes the chain upstream's ADD made (no markers), with no process", func() {
		var nat string
		calls := teardown(eth0, func(n *ns.NetNS) {
			upstream(n, eth0, "10.1.0.5", "10.1.0.0/24")
			upstream(n, other, "10.1.0.6", "10.1.0.0/24")
			nat = iptablesCase("nft").kernel(n)
		})
		Expect(calls).To(BeEmpty())
		Expect(nat).To(ContainSubstring(iptablesChain(other)))
	})

	It("leaves a chain another interface of the container still uses to iptables-save", func() {
		calls := teardown(eth0, func(n *ns.NetNS) {
			setup(n, eth0, "10.1.0.5/24")
			setup(n, eth1, "10.2.0.5/24")
		})
		Expect(calls).To(Equal([]string{"iptables-nft-save", "iptables-nft-restore"}))
	})

	It("leaves a chain with a jump no marker accounts for to iptables-save", func() {
		calls := teardown(eth0, func(n *ns.NetNS) {
			setup(n, eth0, "10.1.0.5/24")
			restoreText(n, "iptables-nft-restore", fmt.Sprintf("*nat\n-A POSTROUTING -s 10.9.0.9/32 -m comment --comment %s -j %s\nCOMMIT\n",
				saveQuote(iptablesComment(eth0)), iptablesChain(eth0)))
		})
		Expect(calls).To(Equal([]string{"iptables-nft-save", "iptables-nft-restore"}))
	})
})

// The same for portmap: the attachment's CNI-DN chain and its entries in
// CNI-HOSTPORT-DNAT go over netlink, and the DNAT addresses it returns
// for the conntrack flush are the ones iptables-save would give.
var _ = Describe("iptables-nft portmap teardown over netlink", func() {
	opts := func(id string, ips ...string) PortMapOptions {
		o := PortMapOptions{Owner: Owner{Network: "n", ContainerID: id, IfName: "eth0"}, SNAT: true,
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
				Expect(in(n, func() error { return newIPTablesPortMap().Setup(o) })).To(Succeed())
			}
		}
		var calls []string
		pm := newIPTablesPortMap()
		pm.m.run = countingRun(&calls)
		pm.m.variant = "nft"
		var fastIPs, slowIPs []net.IP
		Expect(in(fast, func() (err error) { fastIPs, err = pm.Teardown(a.Owner); return })).To(Succeed())
		Expect(calls).To(BeEmpty())
		old := newIPTablesPortMap()
		old.m.noNFT, old.m.variant = true, "nft"
		Expect(in(slow, func() (err error) { slowIPs, err = old.Teardown(a.Owner); return })).To(Succeed())
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

// And for the firewall: o's rules in CNI-FORWARD (its marker comment) go
// over netlink; upstream's uncommented rules for its address send it to
// iptables-save, which knows their exact spec.
var _ = Describe("iptables-nft firewall teardown over netlink", func() {
	rules := func(id string, ips ...string) ForwardRules {
		r := ForwardRules{Owner: Owner{Network: "n", ContainerID: id, IfName: "eth0"}}
		for _, ip := range ips {
			r.Addrs = append(r.Addrs, net.ParseIP(ip))
		}
		return r
	}
	a, b := rules("ctr-a", "10.1.0.5", "fd00:1::5"), rules("ctr-b", "10.1.0.6", "fd00:1::6")

	teardown := func(prepare func(n *ns.NetNS)) []string {
		GinkgoHelper()
		fast, slow := testutil.NewNS(), testutil.NewNS()
		for _, n := range []*ns.NetNS{fast, slow} {
			for _, r := range []ForwardRules{a, b} {
				Expect(in(n, func() error { return newIPTablesForward().Setup(r) })).To(Succeed())
			}
			prepare(n)
		}
		var calls []string
		m := newIPTablesForward()
		m.ipt.variant = "nft"
		m.ipt.run = countingRun(&calls)
		Expect(in(fast, func() error { return m.Teardown(a.Owner, a.Addrs) })).To(Succeed())
		old := newIPTablesForward()
		old.ipt.variant, old.ipt.noNFT = "nft", true
		Expect(in(slow, func() error { return old.Teardown(a.Owner, a.Addrs) })).To(Succeed())
		for _, save := range []string{"iptables-nft-save", "ip6tables-nft-save"} {
			filter := testutil.NetfilterOutput(fast, save, "-t", "filter")
			Expect(filter).To(Equal(testutil.NetfilterOutput(slow, save, "-t", "filter")), save)
			Expect(filter).NotTo(ContainSubstring(`id: \"ctr-a\"`))
			Expect(filter).To(ContainSubstring(`id: \"ctr-b\"`), "the other attachment's rules stay")
		}
		return calls
	}

	It("deletes an attachment's rules, IPv4 and IPv6, with no process", func() {
		Expect(teardown(func(*ns.NetNS) {})).To(BeEmpty())
	})

	It("leaves upstream's uncommented rules for the address to iptables-save", func() {
		calls := teardown(func(n *ns.NetNS) {
			restoreText := fmt.Sprintf("*filter\n-A %s -d 10.1.0.5/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n-A %s -s 10.1.0.5/32 -j ACCEPT\nCOMMIT\n", fwdChain, fwdChain)
			Expect(in(n, func() error {
				cmd := exec.Command("iptables-nft-restore", "--noflush")
				cmd.Stdin = strings.NewReader(restoreText)
				if out, err := cmd.CombinedOutput(); err != nil {
					return fmt.Errorf("%w: %s", err, out)
				}
				return nil
			})).To(Succeed())
		})
		Expect(calls).To(Equal([]string{"iptables-nft-save", "iptables-nft-restore"}))
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
		o := PortMapOptions{Owner: Owner{Network: "n", ContainerID: id, IfName: "eth0"}, SNAT: true,
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
		pm.m.variant = "nft"
		pm.m.run = countingRun(&calls)
		Expect(in(fast, func() error { return pm.Setup(o) })).To(Succeed())
		old := newIPTablesPortMap()
		old.m.noNFT, old.m.variant = true, "nft"
		Expect(in(slow, func() error { return old.Setup(o) })).To(Succeed())
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
				pm.m.variant = "nft"
				Expect(in(n, func() error { return pm.Setup(o) })).To(Succeed())
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
