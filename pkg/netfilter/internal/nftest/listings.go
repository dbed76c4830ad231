package nftest

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

// shellFields splits an iptables-save rule into arguments: double quotes
// group, and a backslash keeps the next character.
func ShellFields(s string) []string {
	var out []string
	var cur strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		case c == '"':
			quoted = !quoted
			inWord = true
		case c == ' ' && !quoted:
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

// nftListings is everything iptables-nft-save and ip6tables-nft-save
// (given saveArgs: a table) and nft print of n's rules, expressions
// included, without the save tools' comment lines: what a rule written
// over netlink must print exactly as iptables-restore's does.
func NftListings(n *ns.NetNS, saveArgs ...string) string {
	GinkgoHelper()
	var b strings.Builder
	for _, tool := range []string{"iptables-nft-save", "ip6tables-nft-save"} {
		for _, l := range strings.Split(testutil.NetfilterOutput(n, append([]string{tool}, saveArgs...)...), "\n") {
			if !strings.HasPrefix(l, "#") {
				b.WriteString(l + "\n")
			}
		}
	}
	b.WriteString(testutil.NetfilterOutput(n, "nft", "--debug=netlink", "list", "ruleset"))
	return b.String()
}

// nftSaveTools are iptables-nft's tools, IPv4 then IPv6.
var nftSaveTools = []string{"iptables-nft", "ip6tables-nft"}

// SavedRules lists, per tool (iptables-nft, ip6tables-nft), the rules of
// n's table as tool-save prints them ("-A <chain> <spec>") that keep
// picks.
func SavedRules(n *ns.NetNS, table string, keep func(line string) bool) map[string][]string {
	GinkgoHelper()
	out := map[string][]string{}
	for _, tool := range nftSaveTools {
		for _, l := range strings.Split(testutil.NetfilterOutput(n, tool+"-save", "-t", table), "\n") {
			if strings.HasPrefix(l, "-A ") && keep(l) {
				out[tool] = append(out[tool], l)
			}
		}
	}
	return out
}

// CheckEachBySpec has iptables find, by its spec (tool -C, as upstream's
// DEL and iptables -D look a rule up), each rule of n's table that keep
// picks; a rule not found fails the spec.
func CheckEachBySpec(n *ns.NetNS, table string, keep func(line string) bool) {
	GinkgoHelper()
	rules := SavedRules(n, table, keep)
	for _, tool := range nftSaveTools {
		for _, l := range rules[tool] {
			testutil.NetfilterOutput(n, append([]string{tool, "-t", table, "-C"}, ShellFields(strings.TrimPrefix(l, "-A "))...)...)
		}
	}
}
