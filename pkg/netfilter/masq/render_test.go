package masq

import (
	"errors"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables/expr"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
	"github.com/cniforge/plugins/pkg/netfilter/macspoof"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

func cidr(t testing.TB, s string) *net.IPNet {
	t.Helper()
	ip, n, err := net.ParseCIDR(s)
	if err != nil {
		t.Fatal(err)
	}
	n.IP = ip
	return n
}

func TestNames(t *testing.T) {
	// Expected values computed with sha512sum / sha256sum, not with this code.
	if got := netfilter.IptablesChain(netfilter.Owner{Network: "mynet", ContainerID: "dummy"}); got != "CNI-1b29d9511ed2bb3134d925d5" {
		t.Errorf("iptablesChain = %q", got)
	}
	if got := netfilter.IptablesComment(netfilter.Owner{Network: "mynet", ContainerID: "dummy", IfName: "eth0"}); got != `name: "mynet" id: "dummy"` {
		t.Errorf("iptablesComment = %q", got)
	}
	o := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
	// Upstream's: h(network)-h(ifname:containerID), h = 16 hex of SHA-512.
	if got, want := netfilter.NftComment(o), "8e48f37d5de60467-376ebbf2634c3ec2, net: net1, if: eth0, id: ctr-a"; got != want {
		t.Errorf("nftComment = %q, want %q", got, want)
	}
	// Our earlier releases' form, still read.
	if got, want := netfilter.NftLegacyComment(o), "62b5e9ed03409c0fb073219ebe8eb5ad, net: net1, if: eth0, id: ctr-a"; got != want {
		t.Errorf("nftLegacyComment = %q, want %q", got, want)
	}
	// Double quotes are removed from the names, as upstream does.
	q := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: `e"0`}
	if got, want := netfilter.NftComment(q), netfilter.NftOwnerHash(q)+", net: net1, if: e0, id: ctr-a"; got != want {
		t.Errorf("nftComment = %q, want %q", got, want)
	}
	if got, want := macspoof.MacspoofChainName(o), "cni-br-iface-ctr-a-eth0"; got != want {
		t.Errorf("macspoofChainName = %q, want %q", got, want)
	}
	if got, want := macspoof.MacspoofComment(o), "macspoofchk-ctr-a-eth0"; got != want {
		t.Errorf("macspoofComment = %q, want %q", got, want)
	}
}

func TestNFTCommentRoundTrip(t *testing.T) {
	long := strings.Repeat("f", 64)
	for _, o := range []netfilter.Owner{
		{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"},
		{Network: "a-rather-long-network-name_v2.prod", ContainerID: long, IfName: "net1"},
	} {
		for _, c := range []string{netfilter.NftComment(o), netfilter.NftLegacyComment(o)} {
			if len(c) > netfilter.NftCommentMax {
				t.Errorf("%v: comment %d bytes > %d", o, len(c), netfilter.NftCommentMax)
			}
			oc, ok := netfilter.ParseNFTComment(c)
			if !ok || !oc.Owns(o) || !oc.InNetwork(o.Network) || oc.InNetwork(o.Network+"x") {
				t.Errorf("parseNFTComment(%q) = %+v, %v", c, oc, ok)
			}
		}
	}
	// Same network and container, other interface: another owner.
	a := netfilter.Owner{Network: "n", ContainerID: "c", IfName: "eth0"}
	b := netfilter.Owner{Network: "n", ContainerID: "c", IfName: "eth1"}
	if netfilter.NftOwnerHash(a) == netfilter.NftOwnerHash(b) || netfilter.NftLegacyHash(a) == netfilter.NftLegacyHash(b) {
		t.Error("ifname does not change the nftables owner hash")
	}
	for _, c := range []string{"", "hello", "xyz, net: n, if: e, id: c", strings.Repeat("a", 32) + ", net: n",
		strings.Repeat("a", 33) + ", net: n", strings.Repeat("a", 16) + "-" + strings.Repeat("g", 16) + ", net: n"} {
		if _, ok := netfilter.ParseNFTComment(c); ok {
			t.Errorf("parseNFTComment(%q) accepted a foreign comment", c)
		}
	}
}

func TestRenderIPTables(t *testing.T) {
	o := netfilter.Owner{Network: "mynet", ContainerID: "dummy", IfName: "eth0"}
	got := renderIPTables(o, []*net.IPNet{
		cidr(t, "10.1.0.5/24"), cidr(t, "fd00:1::5/64"), cidr(t, "10.2.0.7/16"), cidr(t, "10.1.0.5/24"),
	})
	const c = `-m comment --comment "name: \"mynet\" id: \"dummy\""`
	const mark = `-m comment --comment "name: \"mynet\" id: \"dummy\" if: 65746830"`
	want4 := strings.Join([]string{
		"*nat",
		"-N CNI-1b29d9511ed2bb3134d925d5",
		"-A CNI-1b29d9511ed2bb3134d925d5 -s 10.1.0.5/32 -d 10.1.0.0/24 " + mark,
		"-A CNI-1b29d9511ed2bb3134d925d5 -s 10.2.0.7/32 -d 10.2.0.0/16 " + mark,
		"-A CNI-1b29d9511ed2bb3134d925d5 -d 10.1.0.0/24 " + c + " -j ACCEPT",
		"-A CNI-1b29d9511ed2bb3134d925d5 -d 10.2.0.0/16 " + c + " -j ACCEPT",
		"-A CNI-1b29d9511ed2bb3134d925d5 ! -d 224.0.0.0/4 " + c + " -j MASQUERADE",
		"-A POSTROUTING -s 10.1.0.5/32 " + c + " -j CNI-1b29d9511ed2bb3134d925d5",
		"-A POSTROUTING -s 10.2.0.7/32 " + c + " -j CNI-1b29d9511ed2bb3134d925d5",
		"COMMIT", "",
	}, "\n")
	want6 := strings.Join([]string{
		"*nat",
		"-N CNI-1b29d9511ed2bb3134d925d5",
		"-A CNI-1b29d9511ed2bb3134d925d5 -s fd00:1::5/128 -d fd00:1::/64 " + mark,
		"-A CNI-1b29d9511ed2bb3134d925d5 -d fd00:1::/64 " + c + " -j ACCEPT",
		"-A CNI-1b29d9511ed2bb3134d925d5 ! -d ff00::/8 " + c + " -j MASQUERADE",
		"-A POSTROUTING -s fd00:1::5/128 " + c + " -j CNI-1b29d9511ed2bb3134d925d5",
		"COMMIT", "",
	}, "\n")
	if got[nftnl.IPv4] != want4 {
		t.Errorf("IPv4:\n%s\nwant:\n%s", got[nftnl.IPv4], want4)
	}
	if got[nftnl.IPv6] != want6 {
		t.Errorf("IPv6:\n%s\nwant:\n%s", got[nftnl.IPv6], want6)
	}
	if only4 := renderIPTables(o, []*net.IPNet{cidr(t, "10.1.0.5/24")}); len(only4) != 1 || only4[nftnl.IPv6] != "" {
		t.Errorf("IPv4-only attachment renders %d families", len(only4))
	}
}

func TestRenderNFTables(t *testing.T) {
	o := netfilter.Owner{Network: "net1", ContainerID: "ctr-a", IfName: "eth0"}
	got := renderNFTables(o, []*net.IPNet{cidr(t, "10.1.0.5/24"), cidr(t, "fd00:1::5/64"), cidr(t, "10.1.0.5/24")})
	const c = `comment "8e48f37d5de60467-376ebbf2634c3ec2, net: net1, if: eth0, id: ctr-a"`
	want := `table inet cni_plugins_masquerade {
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		ip daddr 224.0.0.0/4 return
		ip6 daddr ff00::/8 return
		goto masq_checks
	}

	chain masq_checks {
		ip saddr 10.1.0.5 ip daddr != 10.1.0.0/24 masquerade ` + c + `
		ip6 saddr fd00:1::5 ip6 daddr != fd00:1::/64 masquerade ` + c + `
	}
}
`
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestNewMasqBackends(t *testing.T) {
	for name, want := range map[string]string{"iptables": "iptables", "nftables": "nftables"} {
		m, err := NewMasq(name)
		if err != nil || m.Backend() != want {
			t.Errorf("NewMasq(%q) = %v, %v", name, m, err)
		}
	}
	_, err := NewMasq("ipfw")
	if !errors.Is(err, netfilter.ErrUnknownBackend) || !strings.Contains(err.Error(), `ipMasqBackend: "ipfw"`) {
		t.Errorf("NewMasq(ipfw) error = %v", err)
	}
}

const sampleSave = `# Generated by iptables-nft-save v1.8.9 (nf_tables)
*nat
:PREROUTING ACCEPT [0:0]
:POSTROUTING ACCEPT [3:180]
:CNI-1b29d9511ed2bb3134d925d5 - [0:0]
:CNI-aaaaaaaaaaaaaaaaaaaaaaaa - [0:0]
:CNI-DN-1234 - [0:0]
-A POSTROUTING -s 10.1.0.5/32 -m comment --comment "name: \"mynet\" id: \"dummy\"" -j CNI-1b29d9511ed2bb3134d925d5
-A POSTROUTING -s 10.1.0.5/32 -m comment --comment "name: \"mynet\" id: \"dummy\"" -j CNI-1b29d9511ed2bb3134d925d5
-A POSTROUTING -s 10.1.0.9/32 -j CNI-aaaaaaaaaaaaaaaaaaaaaaaa
-A CNI-1b29d9511ed2bb3134d925d5 -d 10.1.0.0/24 -m comment --comment "name: \"mynet\" id: \"dummy\"" -j ACCEPT
-A CNI-1b29d9511ed2bb3134d925d5 ! -d 224.0.0.0/4 -m comment --comment "name: \"mynet\" id: \"dummy\"" -j MASQUERADE
-A CNI-aaaaaaaaaaaaaaaaaaaaaaaa -d 10.1.0.0/24 -m comment --comment "name: \"other\" id: \"x\"" -j ACCEPT
COMMIT
# Completed
`

func TestNATSave(t *testing.T) {
	t0, err := iptables.ParseNATSave([]byte(sampleSave))
	tab := natTable(t0)
	if err != nil {
		t.Fatal(err)
	}
	o := netfilter.Owner{Network: "mynet", ContainerID: "dummy", IfName: "eth0"}
	want := desiredIPTables(o, nftnl.IPv4, []*net.IPNet{cidr(t, "10.1.0.5/24")})
	// The chain has upstream's layout (no markers): its jumps are o's.
	if miss := tab.missing(want); len(miss) != 0 {
		t.Errorf("missing = %q, want none", miss)
	}
	// Merging adds the marker (the chain is rewritten) and drops the
	// duplicated jump.
	lines := tab.mergeLines(o, nftnl.IPv4, want)
	if countPrefix(lines, "-D POSTROUTING") != 1 || countPrefix(lines, "-A POSTROUTING") != 0 ||
		lines[0] != ":CNI-1b29d9511ed2bb3134d925d5 - [0:0]" || !slices.Contains(lines, "-A CNI-1b29d9511ed2bb3134d925d5 "+want.markers[0].spec) {
		t.Errorf("mergeLines = %q", lines)
	}
	// Tearing down any interface of an upstream-made chain removes it whole,
	// as upstream's DEL does.
	other := netfilter.Owner{Network: "mynet", ContainerID: "dummy", IfName: "eth1"}
	if got := tab.teardownLines(other, nftnl.IPv4); !slices.Equal(got, tab.deleteLines(netfilter.IptablesChain(o))) {
		t.Errorf("teardownLines of an upstream chain = %q", got)
	}
	// A second address is missing: Check names its jump and ACCEPT.
	want2 := desiredIPTables(o, nftnl.IPv4, []*net.IPNet{cidr(t, "10.1.0.5/24"), cidr(t, "10.3.0.5/24")})
	miss := tab.missing(want2)
	if len(miss) != 2 || !strings.Contains(miss[0], "-d 10.3.0.0/24") || !strings.Contains(miss[1], "-s 10.3.0.5/32") {
		t.Errorf("missing = %q", miss)
	}
	if got := tab.missing(desiredIPTables(netfilter.Owner{Network: "n", ContainerID: "c"}, nftnl.IPv4, []*net.IPNet{cidr(t, "10.1.0.5/24")})); len(got) != 1 || !strings.Contains(got[0], "nat chain CNI-") {
		t.Errorf("missing for absent chain = %q", got)
	}
	wantDel := []string{
		"-D POSTROUTING -s 10.1.0.9/32 -j CNI-aaaaaaaaaaaaaaaaaaaaaaaa",
		"-F CNI-aaaaaaaaaaaaaaaaaaaaaaaa", "-X CNI-aaaaaaaaaaaaaaaaaaaaaaaa",
	}
	if got := tab.deleteLines("CNI-aaaaaaaaaaaaaaaaaaaaaaaa"); !slices.Equal(got, wantDel) {
		t.Errorf("deleteLines = %q", got)
	}
	if got := tab.deleteLines("CNI-000000000000000000000000"); len(got) != 0 {
		t.Errorf("deleteLines of an absent chain = %q", got)
	}
	owned := tab.ownedChains()
	if len(owned) != 2 || owned["CNI-1b29d9511ed2bb3134d925d5"] != "mynet" || owned["CNI-aaaaaaaaaaaaaaaaaaaaaaaa"] != "other" {
		t.Errorf("ownedChains = %v", owned)
	}
	if _, err := iptables.ParseNATSave([]byte("*nat\n-Q x\nCOMMIT\n")); err == nil {
		t.Error("parseNATSave accepted garbage")
	}
}

func countPrefix(lines []string, p string) int {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, p) {
			n++
		}
	}
	return n
}

func TestAddrForms(t *testing.T) {
	for _, tc := range []struct {
		in         *net.IPNet
		host, subn string
	}{
		{cidr(t, "10.1.0.5/24"), "10.1.0.5/32", "10.1.0.0/24"},
		// 16-byte IPv4 address with a 16-byte mask, as some results carry.
		{&net.IPNet{IP: net.ParseIP("10.1.0.5"), Mask: net.CIDRMask(120, 128)}, "10.1.0.5/32", "10.1.0.0/24"},
		{&net.IPNet{IP: net.ParseIP("10.1.0.5"), Mask: net.CIDRMask(16, 32)}, "10.1.0.5/32", "10.1.0.0/16"},
		{cidr(t, "fd00:1::5/64"), "fd00:1::5/128", "fd00:1::/64"},
		{cidr(t, "10.1.0.5/32"), "10.1.0.5/32", "10.1.0.5/32"},
	} {
		if h, s := nftnl.HostAddr(tc.in).String(), nftnl.SubnetOf(tc.in).String(); h != tc.host || s != tc.subn {
			t.Errorf("%v: host %s subnet %s, want %s %s", tc.in, h, s, tc.host, tc.subn)
		}
	}
}

func TestRenderShortAddressLoads(t *testing.T) {
	v6 := nftnl.MatchFamily(nftnl.IPv6)
	v4 := nftnl.MatchFamily(nftnl.IPv4)
	load := func(off, n uint32) expr.Any {
		return &expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n}
	}
	mask := func(m ...byte) expr.Any {
		return &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: uint32(len(m)), Mask: m, Xor: make([]byte, len(m))}
	}
	cmp := func(op expr.CmpOp, d ...byte) expr.Any { return &expr.Cmp{Op: op, Register: 1, Data: d} }
	for _, c := range []struct {
		exprs []expr.Any
		want  string
	}{
		// As nft compiles them.
		{append(slices.Clone(v6), load(24, 1), cmp(expr.CmpOpEq, 0xff)), "ip6 daddr ff00::/8"},
		{append(slices.Clone(v4), load(16, 3), cmp(expr.CmpOpNeq, 10, 1, 0)), "ip daddr != 10.1.0.0/24"},
		{append(slices.Clone(v4), load(16, 1), mask(0xf0), cmp(expr.CmpOpEq, 0xe0)), "ip daddr 224.0.0.0/4"},
		{append(slices.Clone(v6), load(8, 8), cmp(expr.CmpOpEq, 0xfd, 0, 0, 1, 0, 0, 0, 0)), "ip6 saddr fd00:1::/64"},
		// As this package builds them.
		{append(slices.Clone(v6), nftnl.MatchAddr(nftnl.IPv6, false, expr.CmpOpEq, nftnl.MustCIDR("ff00::/8"))...), "ip6 daddr ff00::/8"},
		{append(slices.Clone(v4), nftnl.MatchAddr(nftnl.IPv4, false, expr.CmpOpNeq, nftnl.MustCIDR("10.1.0.0/24"))...), "ip daddr != 10.1.0.0/24"},
		{append(slices.Clone(v4), nftnl.MatchAddr(nftnl.IPv4, true, expr.CmpOpEq, nftnl.MustCIDR("10.1.0.5/32"))...), "ip saddr 10.1.0.5"},
	} {
		if got := nftnl.RenderExprs(c.exprs); got != c.want {
			t.Errorf("renderExprs = %q, want %q", got, c.want)
		}
	}
	// Not prefixes: printed raw, so they never equal one of ours.
	for _, es := range [][]expr.Any{
		append(slices.Clone(v4), load(16, 1), mask(0x0f), cmp(expr.CmpOpEq, 0x0e)),        // mask not a prefix
		append(slices.Clone(v4), load(16, 1), mask(0xf0), cmp(expr.CmpOpEq, 0xe1)),        // bits past the prefix
		append(slices.Clone(v4), load(17, 2), cmp(expr.CmpOpEq, 1, 0)),                    // not the field's start
		append(slices.Clone(v4), load(16, 3), cmp(expr.CmpOpEq, 10, 1)),                   // compare shorter than the load
		append(slices.Clone(v4), load(16, 4), mask(0xff, 0xff), cmp(expr.CmpOpEq, 10, 1)), // mask shorter than the load
	} {
		if got := nftnl.RenderExprs(es); !strings.Contains(got, "expr.") {
			t.Errorf("renderExprs rendered a non-prefix match as %q", got)
		}
	}
}

// TestMarkerOddIfNames merges and tears down, as iptables-save would print
// them, the markers of interfaces whose names hold characters that
// iptables-save escapes.
func TestMarkerOddIfNames(t *testing.T) {
	for _, name := range []string{`e"1`, `e\1`, `e'1`} {
		o := netfilter.Owner{Network: "mynet", ContainerID: "dummy", IfName: name}
		eth0 := netfilter.Owner{Network: "mynet", ContainerID: "dummy", IfName: "eth0"}
		r0 := desiredIPTables(eth0, nftnl.IPv4, []*net.IPNet{cidr(t, "10.1.0.5/24")})
		r := desiredIPTables(o, nftnl.IPv4, []*net.IPNet{cidr(t, "10.2.0.5/24")})
		// The table after both Setups, as iptables-save prints it
		// (markers sorted by interface name: these sort before "eth0").
		var save strings.Builder
		save.WriteString("*nat\n:POSTROUTING ACCEPT [0:0]\n:" + r.chain + " - [0:0]\n")
		for _, j := range slices.Concat(r.jumps, r0.jumps) {
			save.WriteString("-A POSTROUTING " + j + "\n")
		}
		for _, m := range slices.Concat(r.markers, r0.markers) {
			save.WriteString("-A " + r.chain + " " + m.spec + "\n")
		}
		for _, a := range slices.Concat(r.accepts, r0.accepts) {
			save.WriteString("-A " + r.chain + " " + a + "\n")
		}
		save.WriteString("-A " + r.chain + " " + r.masq + "\nCOMMIT\n")
		t0, err := iptables.ParseNATSave([]byte(save.String()))
		tab := natTable(t0)
		if err != nil {
			t.Fatal(err)
		}
		if !tab.view(r.chain).hasMarkers(name) {
			t.Errorf("%q: marker not recognised in %q", name, tab.Rules[r.chain])
		}
		if lines := tab.mergeLines(o, nftnl.IPv4, r); lines != nil {
			t.Errorf("%q: repeated merge = %q, want nothing", name, lines)
		}
		lines := tab.teardownLines(o, nftnl.IPv4)
		if slices.Contains(lines, "-X "+r.chain) || !slices.Contains(lines, "-A "+r.chain+" "+r0.markers[0].spec) {
			t.Errorf("%q: teardown = %q, want eth0's rules kept", name, lines)
		}
	}
}

func TestMarkerCommentTooLong(t *testing.T) {
	o := netfilter.Owner{Network: strings.Repeat("n", 230), ContainerID: "dummy", IfName: "eth0"}
	calls := 0
	m := &iptablesMasq{Runner: &iptables.Runner{Variant: "nft", Run: func(string, []string, []byte) ([]byte, error) {
		calls++
		return nil, errors.New("iptables-restore: line 3 failed")
	}}}
	err := m.Setup(o, []*net.IPNet{cidr(t, "10.1.0.5/24")})
	if err == nil || !strings.Contains(err.Error(), `network "`+o.Network+`"`) || !strings.Contains(err.Error(), "255") {
		t.Errorf("Setup = %v, want an error naming the network and the 255-byte limit", err)
	}
	if calls != 0 {
		t.Errorf("Setup ran %d processes before failing, want none", calls)
	}
	// A short network name fits.
	if err := netfilter.CheckIPTablesComment(netfilter.Owner{Network: "mynet", ContainerID: strings.Repeat("c", 64), IfName: "0123456789abcde"}); err != nil {
		t.Error(err)
	}
}

// TestMissingWithUpstreamAppends checks a chain that upstream's ADD of
// another interface appended to: its ACCEPT and MASQUERADE come after ours.
func TestMissingWithUpstreamAppends(t *testing.T) {
	o := netfilter.Owner{Network: "mynet", ContainerID: "dummy", IfName: "eth0"}
	r := desiredIPTables(o, nftnl.IPv4, []*net.IPNet{cidr(t, "10.1.0.5/24")})
	c := iptables.SaveQuote(netfilter.IptablesComment(o))
	rules := append(r.rules(), acceptSpec("10.2.0.0/24", c), masqSpec(nftnl.IPv4, c))
	tab := natTable{Chains: map[string]bool{r.chain: true}, Rules: map[string][]string{
		r.chain:       rules,
		"POSTROUTING": append(slices.Clone(r.jumps), "-s 10.2.0.5/32 -m comment --comment "+c+" -j "+r.chain),
	}}
	if miss := tab.missing(r); len(miss) != 0 {
		t.Errorf("missing = %q, want none", miss)
	}
	// Our ACCEPT after the first MASQUERADE is still missing.
	tab.Rules[r.chain] = []string{r.markers[0].spec, r.masq, r.accepts[0]}
	if miss := tab.missing(r); len(miss) != 1 || !strings.Contains(miss[0], "-j ACCEPT (before the MASQUERADE)") {
		t.Errorf("missing = %q, want the ACCEPT", miss)
	}
	// No MASQUERADE at all.
	tab.Rules[r.chain] = []string{r.markers[0].spec, r.accepts[0]}
	if miss := tab.missing(r); len(miss) != 1 || !strings.Contains(miss[0], "MASQUERADE") {
		t.Errorf("missing = %q, want the MASQUERADE", miss)
	}
}
