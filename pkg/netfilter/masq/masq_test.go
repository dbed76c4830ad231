package masq

import (
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// backendCase is one backend under test with a way to read, from inside the
// test namespace, what the kernel holds of our rules, as text.
type backendCase struct {
	name string
	new  func() netfilter.Masq
	// kernel returns our rules in n as the kernel's own tool prints them;
	// a tool that fails fails the spec (testutil.NetfilterOutput).
	kernel func(n *ns.NetNS) string
	// want renders what kernel should print after Setup(o, addrs) alone.
	want func(o netfilter.Owner, addrs []*net.IPNet) string
	// breakRule deletes one rule of o behind the backend's back.
	breakRule func(o netfilter.Owner) error
}

func iptablesCase(variant string) backendCase {
	save := func(f nftnl.Family) string {
		return (&iptablesMasq{Runner: &iptables.Runner{Variant: variant}}).Tool(f, "save")
	}
	restore := func(f nftnl.Family) string {
		return (&iptablesMasq{Runner: &iptables.Runner{Variant: variant}}).Tool(f, "restore")
	}
	return backendCase{
		name: "iptables-" + variant,
		new:  func() netfilter.Masq { return &iptablesMasq{Runner: &iptables.Runner{Variant: variant}} },
		kernel: func(n *ns.NetNS) string {
			GinkgoHelper()
			var b strings.Builder
			for _, f := range nftnl.Families {
				out := testutil.NetfilterOutput(n, save(f), "-t", "nat")
				for _, l := range strings.Split(out, "\n") {
					if strings.HasPrefix(l, "-A ") || strings.HasPrefix(l, ":CNI-") {
						fmt.Fprintf(&b, "%s %s\n", f, l)
					}
				}
			}
			return b.String()
		},
		want: func(o netfilter.Owner, addrs []*net.IPNet) string {
			// What iptables-save prints for the rules Setup restored: the
			// chain declaration, POSTROUTING (built-in, listed first), then
			// the attachment chain.
			var b strings.Builder
			for _, f := range nftnl.Families {
				as := nftnl.ByFamily(addrs)[f]
				if len(as) == 0 {
					continue
				}
				r := desiredIPTables(o, f, as)
				fmt.Fprintf(&b, "%s :%s - [0:0]\n", f, r.chain)
				for _, j := range r.jumps {
					fmt.Fprintf(&b, "%s -A POSTROUTING %s\n", f, j)
				}
				for _, s := range r.rules() {
					fmt.Fprintf(&b, "%s -A %s %s\n", f, r.chain, s)
				}
			}
			return b.String()
		},
		breakRule: func(o netfilter.Owner) error {
			// Drop the MASQUERADE rule (the chain's last) of IPv4.
			masq := masqSpec(nftnl.IPv4, iptables.SaveQuote(netfilter.IptablesComment(o)))
			cmd := exec.Command(restore(nftnl.IPv4), "--noflush")
			cmd.Stdin = strings.NewReader(fmt.Sprintf("*nat\n-D %s %s\nCOMMIT\n", netfilter.IptablesChain(o), masq))
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
			return nil
		},
	}
}

var nftablesCase = backendCase{
	name: "nftables",
	new:  func() netfilter.Masq { return newNFTablesMasq() },
	kernel: func(n *ns.NetNS) string {
		GinkgoHelper()
		// Listing an absent table fails; an absent table holds no rules.
		if !strings.Contains(testutil.NetfilterOutput(n, "nft", "list", "tables", "inet"), "table inet "+nftTableName+"\n") {
			return ""
		}
		return testutil.NetfilterOutput(n, "nft", "list", "table", "inet", nftTableName)
	},
	want: renderNFTables,
	breakRule: func(o netfilter.Owner) error {
		out, err := exec.Command("nft", "-a", "list", "chain", "inet", nftTableName, nftMasqChain).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, netfilter.NftOwnerHash(o)) {
				_, h, _ := strings.Cut(l, "# handle ")
				out, err := exec.Command("nft", "delete", "rule", "inet", nftTableName, nftMasqChain, "handle", strings.TrimSpace(h)).CombinedOutput()
				if err != nil {
					return fmt.Errorf("%w: %s", err, out)
				}
				return nil
			}
		}
		return fmt.Errorf("no rule of %s found", o)
	},
}

// addrCases are the address sets the iptables-nft netlink writer and
// reader are held to iptables-restore's and iptables-save's with: prefixes
// that end on and inside a byte, one family and both.
var addrCases = []TableEntry{
	Entry("one IPv4 address", "10.1.0.5/24"),
	Entry("a prefix that ends inside a byte", "10.1.0.5/20"),
	Entry("a short prefix", "10.1.0.5/7"),
	Entry("two addresses of one subnet", "10.1.0.5/24", "10.1.0.6/24"),
	Entry("two subnets", "10.1.0.5/24", "10.2.0.5/16"),
	Entry("one IPv6 address", "fd00:1::5/64"),
	Entry("an IPv6 prefix that ends inside a byte", "fd00:1::5/61"),
	Entry("dual stack", "10.1.0.5/24", "fd00:1::5/64"),
}

func mustCIDRs(ss ...string) []*net.IPNet {
	var out []*net.IPNet
	for _, s := range ss {
		ip, n, err := net.ParseCIDR(s)
		Expect(err).NotTo(HaveOccurred())
		n.IP = ip
		out = append(out, n)
	}
	return out
}

var _ = DescribeTableSubtree("masquerade backend", func(bc backendCase) {
	var (
		hostNS *ns.NetNS
		m      netfilter.Masq
		kernel = func() string {
			GinkgoHelper()
			return bc.kernel(hostNS)
		}
		a = netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
		b = netfilter.Owner{Network: "net1", ContainerID: "ctr-b", IfName: "eth0"}
		c = netfilter.Owner{Network: "net2", ContainerID: "ctr-c", IfName: "eth0"}
	)
	addrsA := mustCIDRs("10.1.0.5/24", "fd00:1::5/64")
	addrsB := mustCIDRs("10.1.0.6/24")
	addrsC := mustCIDRs("10.2.0.5/24", "fd00:2::5/64")

	BeforeEach(func() {
		hostNS = testutil.NewNS()
		m = bc.new()
		Expect(kernel()).To(BeEmpty(), "a new namespace holds no rules")
	})

	It("sets up exactly the rendered rules, checks, tears down twice", func() {
		Expect(nftest.In(hostNS, func() error { return m.Check(a, addrsA) })).To(MatchError(netfilter.ErrMissing))
		Expect(nftest.In(hostNS, func() error { return m.Setup(a, addrsA) })).To(Succeed())
		Expect(kernel()).To(Equal(bc.want(a, addrsA)))
		Expect(nftest.In(hostNS, func() error { return m.Check(a, addrsA) })).To(Succeed())

		// Idempotent: a second Setup changes nothing.
		Expect(nftest.In(hostNS, func() error { return m.Setup(a, addrsA) })).To(Succeed())
		Expect(kernel()).To(Equal(bc.want(a, addrsA)))

		// Check is about these addresses: another address is missing.
		err := nftest.In(hostNS, func() error { return m.Check(a, mustCIDRs("10.1.0.5/24", "10.3.0.5/24")) })
		Expect(err).To(MatchError(netfilter.ErrMissing))
		Expect(err.Error()).To(ContainSubstring("10.3.0.5"))

		Expect(nftest.In(hostNS, func() error { return m.Teardown(a) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Check(a, addrsA) })).To(MatchError(netfilter.ErrMissing))
		Expect(nftest.In(hostNS, func() error { return m.Teardown(a) })).To(Succeed())
		if bc.name == "nftables" {
			// The shared table and base chain stay; no rule of a is left.
			Expect(kernel()).To(Equal(bc.want(a, nil)))
		} else {
			Expect(kernel()).To(BeEmpty())
		}
	})

	It("fails Check when one rule is deleted and Setup repairs it", func() {
		Expect(nftest.In(hostNS, func() error { return m.Setup(a, addrsA) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return bc.breakRule(a) })).To(Succeed())
		Expect(kernel()).NotTo(Equal(bc.want(a, addrsA)))
		err := nftest.In(hostNS, func() error { return m.Check(a, addrsA) })
		Expect(err).To(MatchError(netfilter.ErrMissing))
		Expect(err.Error()).To(Or(ContainSubstring("MASQUERADE"), ContainSubstring("masquerade")))

		Expect(nftest.In(hostNS, func() error { return m.Setup(a, addrsA) })).To(Succeed())
		Expect(kernel()).To(Equal(bc.want(a, addrsA)))
		Expect(nftest.In(hostNS, func() error { return m.Check(a, addrsA) })).To(Succeed())
	})

	It("keeps attachments apart: Teardown and GC remove only their own", func() {
		for o, as := range map[netfilter.Owner][]*net.IPNet{a: addrsA, b: addrsB, c: addrsC} {
			Expect(nftest.In(hostNS, func() error { return m.Setup(o, as) })).To(Succeed())
		}
		Expect(nftest.In(hostNS, func() error { return m.Teardown(b) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Check(b, addrsB) })).To(MatchError(netfilter.ErrMissing))
		Expect(nftest.In(hostNS, func() error { return m.Check(a, addrsA) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Check(c, addrsC) })).To(Succeed())

		Expect(nftest.In(hostNS, func() error { return m.Setup(b, addrsB) })).To(Succeed())
		// GC of net1 keeping only b: a goes, b stays, c (net2) is not net1's.
		Expect(nftest.In(hostNS, func() error { return m.GC("net1", []netfilter.Owner{b, c}) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Check(a, addrsA) })).To(MatchError(netfilter.ErrMissing))
		Expect(nftest.In(hostNS, func() error { return m.Check(b, addrsB) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Check(c, addrsC) })).To(Succeed())
		Expect(kernel()).NotTo(ContainSubstring("10.1.0.5"))

		// GC with nothing to keep empties net2; a repeated GC is a no-op.
		Expect(nftest.In(hostNS, func() error { return m.GC("net2", nil) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.GC("net2", nil) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Check(c, addrsC) })).To(MatchError(netfilter.ErrMissing))
		Expect(nftest.In(hostNS, func() error { return m.Check(b, addrsB) })).To(Succeed())

		Expect(nftest.In(hostNS, func() error { return m.Teardown(b) })).To(Succeed())
		Expect(kernel()).NotTo(ContainSubstring("10.1.0.6"))
	})

	It("keeps two attachments of one container to one network apart", func() {
		// Same container, same network, two interfaces: iptables gives
		// both one chain (upstream's naming), so each Setup and Teardown
		// must leave the other's rules alone.
		eth0 := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
		eth1 := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth1"}
		eth2 := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth2"}
		addrs0 := mustCIDRs("10.1.0.5/24", "fd00:1::5/64")
		addrs1 := mustCIDRs("10.2.0.5/24")
		Expect(nftest.In(hostNS, func() error { return m.Setup(eth0, addrs0) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Setup(eth1, addrs1) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Check(eth0, addrs0) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Check(eth1, addrs1) })).To(Succeed())

		// A repeated Setup of either changes nothing.
		before := kernel()
		Expect(nftest.In(hostNS, func() error { return m.Setup(eth0, addrs0) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Setup(eth1, addrs1) })).To(Succeed())
		Expect(kernel()).To(Equal(before))

		// Rolling back an interface that never got set up touches nothing.
		Expect(nftest.In(hostNS, func() error { return m.Teardown(eth2) })).To(Succeed())
		Expect(kernel()).To(Equal(before))

		Expect(nftest.In(hostNS, func() error { return m.Teardown(eth1) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Check(eth1, addrs1) })).To(MatchError(netfilter.ErrMissing))
		Expect(nftest.In(hostNS, func() error { return m.Check(eth0, addrs0) })).To(Succeed())
		Expect(kernel()).NotTo(ContainSubstring("10.2.0"))
		Expect(nftest.In(hostNS, func() error { return m.Teardown(eth1) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Check(eth0, addrs0) })).To(Succeed())
		// What is left is exactly what eth0 alone makes.
		Expect(kernel()).To(Equal(bc.want(eth0, addrs0)))

		Expect(nftest.In(hostNS, func() error { return m.Teardown(eth0) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Check(eth0, addrs0) })).To(MatchError(netfilter.ErrMissing))
		Expect(kernel()).NotTo(ContainSubstring("10.1.0.5"))
	})

	It("keeps apart interfaces whose names hold quotes and backslashes", func() {
		// skel and the kernel allow any of these in an interface name;
		// iptables-save escapes them in comments.
		eth0 := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
		addrs0 := mustCIDRs("10.1.0.5/24")
		Expect(nftest.In(hostNS, func() error { return m.Setup(eth0, addrs0) })).To(Succeed())
		for i, name := range []string{`e"1`, `e\1`, `e'1`, `'"\`} {
			odd := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: name}
			addrs := mustCIDRs(fmt.Sprintf("10.2.%d.5/24", i))
			Expect(nftest.In(hostNS, func() error { return m.Setup(odd, addrs) })).To(Succeed(), name)
			Expect(nftest.In(hostNS, func() error { return m.Check(odd, addrs) })).To(Succeed(), name)
			Expect(nftest.In(hostNS, func() error { return m.Check(eth0, addrs0) })).To(Succeed(), name)
			before := kernel()
			Expect(nftest.In(hostNS, func() error { return m.Setup(odd, addrs) })).To(Succeed(), name)
			Expect(kernel()).To(Equal(before), "a repeated Setup of %q changes nothing", name)
			Expect(nftest.In(hostNS, func() error { return m.Teardown(odd) })).To(Succeed(), name)
			Expect(kernel()).To(Equal(bc.want(eth0, addrs0)), "Teardown of %q leaves eth0's rules", name)
		}
	})

	It("collects one attachment of a container and keeps its other one", func() {
		eth0 := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
		eth1 := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth1"}
		addrs0 := mustCIDRs("10.1.0.5/24")
		addrs1 := mustCIDRs("10.1.0.6/24")
		Expect(nftest.In(hostNS, func() error { return m.Setup(eth0, addrs0) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Setup(eth1, addrs1) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.GC("net1", []netfilter.Owner{eth0}) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Check(eth0, addrs0) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Check(eth1, addrs1) })).To(MatchError(netfilter.ErrMissing))
		Expect(kernel()).To(Equal(bc.want(eth0, addrs0)))
	})

	It("is removed by TeardownMasqAll, whichever backend made it", func() {
		Expect(nftest.In(hostNS, func() error { return m.Setup(a, addrsA) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Setup(c, addrsC) })).To(Succeed())
		teardownAll := TeardownMasqAll
		if ipt, ok := m.(*iptablesMasq); ok {
			onPath, err := pathIPTablesVariant()
			Expect(err).NotTo(HaveOccurred())
			if ipt.Variant != onPath {
				// TeardownMasqAll uses the iptables on PATH, another
				// variant than this case's, whose rules it cannot see;
				// the same code pointed at this case's variant is tested.
				By(fmt.Sprintf("iptables on PATH is %s: tearing down through %s explicitly", onPath, ipt.Variant))
				teardownAll = func(o netfilter.Owner) error { return teardownMasqAll(o, ipt, newNFTablesMasq()) }
			}
		}
		Expect(nftest.In(hostNS, func() error { return teardownAll(a) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return teardownAll(a) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Check(a, addrsA) })).To(MatchError(netfilter.ErrMissing))
		Expect(nftest.In(hostNS, func() error { return m.Check(c, addrsC) })).To(Succeed())
	})

	It("keeps every attachment when many set up and tear down at once", func() {
		// Plugins run in parallel on a node; each batch must stand alone.
		const n = 8
		owner := func(i int) netfilter.Owner {
			return netfilter.Owner{Network: "net1", ContainerID: fmt.Sprintf("ctr-%d", i), IfName: "eth0"}
		}
		addrs := func(i int) []*net.IPNet { return mustCIDRs(fmt.Sprintf("10.1.0.%d/24", 10+i)) }
		parallel := func(fn func(i int) error) {
			GinkgoHelper()
			errs := make(chan error, n)
			for i := range n {
				go func() { errs <- nftest.In(hostNS, func() error { return fn(i) }) }()
			}
			for range n {
				Expect(<-errs).To(Succeed())
			}
		}
		parallel(func(i int) error { return m.Setup(owner(i), addrs(i)) })
		for i := range n {
			Expect(nftest.In(hostNS, func() error { return m.Check(owner(i), addrs(i)) })).To(Succeed())
		}
		parallel(func(i int) error {
			if i%2 == 0 {
				return m.Teardown(owner(i))
			}
			return nil
		})
		for i := range n {
			err := nftest.In(hostNS, func() error { return m.Check(owner(i), addrs(i)) })
			if i%2 == 0 {
				Expect(err).To(MatchError(netfilter.ErrMissing))
			} else {
				Expect(err).To(Succeed())
			}
		}
	})

	It("keeps both interfaces of a container right when they set up and tear down at once", func() {
		// iptables: eth0 and eth1 share one chain (eth2 keeps it in place),
		// and each change reads the chain and then writes it back.
		eth0 := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
		eth1 := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth1"}
		eth2 := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth2"}
		addrs := map[netfilter.Owner][]*net.IPNet{
			eth0: mustCIDRs("10.1.0.5/24", "fd00:1::5/64"),
			eth1: mustCIDRs("10.2.0.5/24", "fd00:2::5/64"),
			eth2: mustCIDRs("10.3.0.5/24"),
		}
		both := func(fn func(o netfilter.Owner) error, os ...netfilter.Owner) {
			GinkgoHelper()
			errs := make(chan error, len(os))
			for _, o := range os {
				go func() { errs <- nftest.In(hostNS, func() error { return fn(o) }) }()
			}
			for range os {
				Expect(<-errs).To(Succeed())
			}
		}
		setup := func(o netfilter.Owner) error { return m.Setup(o, addrs[o]) }
		Expect(nftest.In(hostNS, func() error { return setup(eth2) })).To(Succeed())
		for round := range 8 {
			both(setup, eth0, eth1)
			for _, o := range []netfilter.Owner{eth0, eth1, eth2} {
				Expect(nftest.In(hostNS, func() error { return m.Check(o, addrs[o]) })).To(Succeed(), "round %d, %s", round, o)
			}
			both(m.Teardown, eth0, eth1)
			Expect(kernel()).To(Equal(bc.want(eth2, addrs[eth2])), "round %d", round)
		}
		both(setup, eth0, eth1)
		both(m.Teardown, eth0, eth1, eth2)
		if bc.name == "nftables" {
			Expect(kernel()).To(Equal(bc.want(eth0, nil)))
		} else {
			Expect(kernel()).To(BeEmpty(), "no chain is left behind")
		}
	})

	It("masquerades forwarded traffic to the host's address, and stops after Teardown", func() {
		contNS, outNS := testutil.NewNS(), testutil.NewNS()
		Expect(wireRouter(hostNS, contNS, outNS)).To(Succeed())
		cont := mustCIDRs("10.1.0.5/24", "fd00:1::5/64")
		Expect(nftest.In(hostNS, func() error { return m.Setup(a, cont) })).To(Succeed())
		Expect(testutil.UDPSource(contNS, outNS, "10.99.0.2")).To(Equal("10.99.0.1"))
		Expect(testutil.UDPSource(contNS, outNS, "fd00:99::2")).To(Equal("fd00:99::1"))
		// Traffic to the container's own subnet keeps its address.
		Expect(nftest.In(hostNS, func() error { return m.Teardown(a) })).To(Succeed())
		Expect(testutil.UDPSource(contNS, outNS, "10.99.0.2")).To(Equal("10.1.0.5"))
		Expect(testutil.UDPSource(contNS, outNS, "fd00:99::2")).To(Equal("fd00:1::5"))
	})
},
	Entry(nil, iptablesCase("nft")),
	Entry(nil, iptablesCase("legacy")),
	Entry(nil, nftablesCase),
)

func (bc backendCase) String() string { return bc.name }

// pathIPTablesVariant names the variant of the iptables on PATH, "nft" or
// "legacy", from what `iptables -V` says ("iptables v1.8.9 (nf_tables)").
func pathIPTablesVariant() (string, error) {
	out, err := exec.Command("iptables", "-V").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("iptables -V: %w: %s", err, out)
	}
	switch v := string(out); {
	case strings.Contains(v, "nf_tables"):
		return "nft", nil
	case strings.Contains(v, "legacy"):
		return "legacy", nil
	default:
		return "", fmt.Errorf("iptables -V: unknown variant in %q", strings.TrimSpace(v))
	}
}

var _ = Describe("iptables backend", func() {
	It("costs one process per family for a fresh Setup", func() {
		hostNS := testutil.NewNS()
		var calls []string
		m := &iptablesMasq{Runner: nftest.Counting(&calls)}
		o := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
		Expect(nftest.In(hostNS, func() error { return m.Setup(o, mustCIDRs("10.1.0.5/24", "fd00:1::5/64")) })).To(Succeed())
		Expect(calls).To(Equal([]string{"iptables-nft-restore", "ip6tables-nft-restore"}))
		calls = nil
		Expect(nftest.In(hostNS, func() error { return m.Setup(o, mustCIDRs("10.1.0.5/24")) })).To(Succeed())
		// Chain exists: the fresh restore fails, a read finds nothing to change.
		Expect(calls).To(Equal([]string{"iptables-nft-restore", "iptables-nft-save"}))

		// Teardown deletes the chain over netlink where it exists;
		// nf_tables tells that IPv6 has none, so ip6tables never runs.
		Expect(nftest.In(hostNS, func() error { return m.Teardown(o) })).To(Succeed())
		calls = nil
		Expect(nftest.In(hostNS, func() error { return m.Setup(o, mustCIDRs("10.1.0.5/24")) })).To(Succeed())
		Expect(calls).To(BeEmpty(), "with the nat table there, Setup writes over netlink (setupNFT)")
		Expect(nftest.In(hostNS, func() error { return m.Teardown(o) })).To(Succeed())
		Expect(calls).To(BeEmpty())
		Expect(testutil.NetfilterOutput(hostNS, "iptables-nft-save", "-t", "nat")).NotTo(ContainSubstring("CNI-"))
		calls = nil
		Expect(nftest.In(hostNS, func() error { return m.Teardown(o) })).To(Succeed())
		Expect(calls).To(BeEmpty())
	})

	It("undoes the IPv4 rules when the IPv6 ones fail", func() {
		hostNS := testutil.NewNS()
		m := &iptablesMasq{Runner: &iptables.Runner{Variant: "nft", Run: func(name string, args []string, stdin []byte) ([]byte, error) {
			if strings.HasPrefix(name, "ip6tables") {
				return nil, errors.New("injected failure")
			}
			return iptables.RunCommand(name, args, stdin)
		}}}
		o := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
		err := nftest.In(hostNS, func() error { return m.Setup(o, mustCIDRs("10.1.0.5/24", "fd00:1::5/64")) })
		Expect(err).To(MatchError(ContainSubstring("injected failure")))
		Expect(testutil.NetfilterOutput(hostNS, "iptables-nft-save", "-t", "nat")).NotTo(ContainSubstring("CNI-"))
	})
})

var _ = Describe("iptables backend rollback", func() {
	It("undoes its IPv4 rules merged into an existing chain when the IPv6 ones fail", func() {
		hostNS := testutil.NewNS()
		eth0 := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
		eth1 := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth1"}
		addrs0 := mustCIDRs("10.1.0.5/24")
		ok := &iptablesMasq{Runner: &iptables.Runner{Variant: "nft"}}
		Expect(nftest.In(hostNS, func() error { return ok.Setup(eth0, addrs0) })).To(Succeed())
		failing := &iptablesMasq{Runner: &iptables.Runner{Variant: "nft", Run: func(name string, args []string, stdin []byte) ([]byte, error) {
			if name == "ip6tables-nft-restore" {
				return nil, errors.New("injected failure")
			}
			return iptables.RunCommand(name, args, stdin)
		}}}
		err := nftest.In(hostNS, func() error { return failing.Setup(eth1, mustCIDRs("10.2.0.5/24", "fd00:2::5/64")) })
		Expect(err).To(MatchError(ContainSubstring("injected failure")))
		kernel := iptablesCase("nft").kernel(hostNS)
		Expect(kernel).To(Equal(iptablesCase("nft").want(eth0, addrs0)), "eth0's rules alone are left")
	})
})

var _ = Describe("nftables backend", func() {
	It("applies all or nothing: a failing batch leaves no rule behind", func() {
		hostNS := testutil.NewNS()
		// A chain named like our base chain but of another kind makes the
		// batch's add-chain fail after the table and masq chain were queued.
		Expect(nftest.In(hostNS, func() error {
			cmd := exec.Command("nft", "-f", "-")
			cmd.Stdin = strings.NewReader("table inet " + nftTableName + " {\n chain " + nftBaseChain +
				" { type filter hook input priority 0; }\n}\n")
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
			return nil
		})).To(Succeed())
		m := newNFTablesMasq()
		a := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
		Expect(nftest.In(hostNS, func() error { return m.Setup(a, mustCIDRs("10.1.0.5/24")) })).NotTo(Succeed())
		listing := nftablesCase.kernel(hostNS)
		Expect(listing).To(ContainSubstring("hook input"))
		Expect(listing).NotTo(ContainSubstring(nftMasqChain))
		Expect(listing).NotTo(ContainSubstring("10.1.0.5"))
	})
})

var _ = Describe("default backend", func() {
	a := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}

	It("is iptables where iptables works", func() {
		hostNS := testutil.NewNS()
		var m netfilter.Masq
		Expect(nftest.In(hostNS, func() (err error) { m, err = NewMasq(""); return err })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Setup(a, mustCIDRs("10.1.0.5/24")) })).To(Succeed())
		Expect(m.Backend()).To(Equal(netfilter.BackendIPTables))
		ipt := newIPTablesMasq()
		Expect(nftest.In(hostNS, func() error { return ipt.Check(a, mustCIDRs("10.1.0.5/24")) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Teardown(a) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return ipt.Check(a, mustCIDRs("10.1.0.5/24")) })).To(MatchError(netfilter.ErrMissing))
	})

	It("falls back to nftables when iptables cannot be used", func() {
		hostNS := testutil.NewNS()
		// A variant whose binaries do not exist stands in for a node
		// without usable iptables.
		m := &autoMasq{ipt: &iptablesMasq{Runner: &iptables.Runner{Variant: "absent"}}, nft: newNFTablesMasq()}
		Expect(nftest.In(hostNS, func() error { return m.Setup(a, mustCIDRs("10.1.0.5/24")) })).To(Succeed())
		Expect(m.Backend()).To(Equal(netfilter.BackendNFTables))
		Expect(nftest.In(hostNS, func() error { return newNFTablesMasq().Check(a, mustCIDRs("10.1.0.5/24")) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Check(a, mustCIDRs("10.1.0.5/24")) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Teardown(a) })).To(Succeed())
		Expect(nftest.In(hostNS, func() error { return m.Check(a, mustCIDRs("10.1.0.5/24")) })).To(MatchError(netfilter.ErrMissing))
	})

	It("reports an iptables failure as such when iptables works", func() {
		hostNS := testutil.NewNS()
		m := &autoMasq{ipt: newIPTablesMasq(), nft: newNFTablesMasq()}
		err := nftest.In(hostNS, func() error { return m.Check(a, mustCIDRs("10.1.0.5/24")) })
		Expect(err).To(MatchError(netfilter.ErrMissing))
		Expect(err.Error()).To(ContainSubstring("iptables masquerade"))
		Expect(m.Backend()).To(Equal(netfilter.BackendIPTables))
	})
})
