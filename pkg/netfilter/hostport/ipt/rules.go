package ipt

import (
	"bytes"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/hostport"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// The iptables layout of port forwarding is upstream's (nat table):
//
//	PREROUTING  -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT   (appended)
//	OUTPUT      -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT   (appended)
//	CNI-HOSTPORT-DNAT, per attachment and protocol, ports in groups of 15:
//	  -p tcp -m comment --comment "dnat name: \"<net>\" id: \"<id>\"" -m multiport --dports 80,443 -j CNI-DN-<hash>
//	CNI-DN-<21 hex of SHA-512(network + containerID)>, per mapping:
//	  -s <container's subnet> [-d <hostIP>/32] -p tcp -m tcp --dport 80 -j CNI-HOSTPORT-SETMARK   (snat: hairpin)
//	  -s 127.0.0.1/32 [-d <hostIP>/32] -p tcp -m tcp --dport 80 -j CNI-HOSTPORT-SETMARK     (snat, IPv4: localhost)
//	  [-d <hostIP>/32] -p tcp -m tcp --dport 80 -j CNI-HOSTPORT-SETMARK                     (snat and masqAll: instead of both)
//	  [-d <hostIP>/32] -p tcp -m tcp --dport 80 -j DNAT --to-destination <container>:8080
//	CNI-HOSTPORT-SETMARK  -m comment --comment "CNI portfwd masquerade mark" -j MARK --set-xmark 0x2000/0x2000
//	POSTROUTING -m comment --comment "CNI portfwd requiring masquerade" -j CNI-HOSTPORT-MASQ   (inserted first)
//	CNI-HOSTPORT-MASQ     -m mark --mark 0x2000/0x2000 -j MASQUERADE
//
// The entry jumps match only traffic destined to a local address
// (CVE-2025-67499) and are appended after the administrator's rules
// (CVE-2019-9946). With snat, IPv4 also gets a guard in the raw table, made
// once and shared (ours alone; upstream has none): route_localnet lets a
// neighbour's packet to 127.0.0.0/8 in, so it is dropped unless it came in
// on lo (CVE-2020-8558):
//
//	raw PREROUTING -j CNI-HOSTPORT-GUARD   (appended)
//	CNI-HOSTPORT-GUARD -d 127.0.0.0/8 ! -i lo -m comment --comment "CNI portfwd route_localnet guard" -j DROP
//
// A change to an attachment holds the flock of its CNI-DN chain and of
// CNI-HOSTPORT-DNAT (the shared chains are created under it) from its
// read to its write; each family is one iptables-save and one
// iptables-restore.
const (
	pmDNATChain    = "CNI-HOSTPORT-DNAT"
	pmSetMarkChain = "CNI-HOSTPORT-SETMARK"
	pmMasqChain    = "CNI-HOSTPORT-MASQ"
	pmGuardChain   = "CNI-HOSTPORT-GUARD"
	pmMultiportMax = 15
)

// pmChain is the per-attachment chain: "CNI-DN-" and SHA-512(network +
// containerID) in hex, 28 characters in all, as upstream names it.
func pmChain(o netfilter.Owner) string {
	sum := sha512.Sum512([]byte(o.Network + o.ContainerID))
	return "CNI-DN-" + hex.EncodeToString(sum[:])[:21]
}

var pmChainRE = iptables.NewLazyRE(`^CNI-DN-[0-9a-f]{21}$`)

// pmComment is the comment of the entry rules, upstream's.
func pmComment(o netfilter.Owner) string {
	return fmt.Sprintf("dnat name: %q id: %q", o.Network, o.ContainerID)
}

var pmCommentRE = iptables.NewLazyRE(`--comment "dnat name: \\"([^"\\]*)\\" id: \\"([^"\\]*)\\""`)

// pmRules is the desired state of one attachment in one family.
type pmRules struct {
	chain   string
	rules   []string // in the CNI-DN chain
	entries []string // in CNI-HOSTPORT-DNAT
	snat    bool
	mark    string // the mark value/mask, "0x2000/0x2000"
	setMark string // the chain marking for masquerade
	ownMark bool   // SETMARK and MASQ are ours to make
	guard   bool   // the route_localnet guard (IPv4 with snat)
	conds   []string
	// alts are the other forms of a rule CHECK accepts: what earlier
	// releases wrote for it.
	alts map[string][]string
	// ports are the host ports the entries send to chain, per protocol.
	ports map[string][]int
}

func desiredPortMap(opts hostport.PortMapOptions, f nftnl.Family) pmRules {
	o := opts.Owner
	bit := uint32(1) << uint(opts.MarkMasqBit)
	r := pmRules{
		chain:   pmChain(o),
		snat:    opts.SNAT,
		mark:    fmt.Sprintf("0x%x/0x%x", bit, bit),
		setMark: pmSetMarkChain,
		ownMark: opts.ExternalSetMarkChain == "",
		guard:   opts.SNAT && f == nftnl.IPv4,
		conds:   opts.ConditionsV4,
		alts:    map[string][]string{},
	}
	if f == nftnl.IPv6 {
		r.conds = opts.ConditionsV6
	}
	if !r.ownMark {
		r.setMark = opts.ExternalSetMarkChain
	}
	cip := opts.ContainerIP(f)
	host := nftnl.HostAddr(&net.IPNet{IP: cip}).String()
	ports := map[string][]int{}
	var protos []string
	for _, m := range opts.MappingsFor(f) {
		dst := ""
		if h := m.HostAddr(); h != nil {
			dst = "-d " + nftnl.HostAddr(&net.IPNet{IP: h}).String() + " "
		}
		base := fmt.Sprintf("%s-p %s -m %s --dport %d", dst, m.Protocol, m.Protocol, m.HostPort)
		switch {
		case opts.SNAT && opts.MasqAll:
			// Upstream (v1.9.1 on) marks "-s 0.0.0.0/0" (or ::/0),
			// which iptables-save prints without -s; that covers
			// localhost too, so there is no 127.0.0.1 rule.
			r.rules = append(r.rules, base+" -j "+r.setMark)
		case opts.SNAT:
			// The container's whole subnet, as upstream: a neighbour on
			// the same bridge reaching this port through the host must be
			// masqueraded too, or the container's answer goes straight
			// back over the bridge un-NATed (unless br_netfilter is on).
			hairpin := "-s " + opts.HairpinNet(f).String() + " " + base + " -j " + r.setMark
			if ones, _ := opts.HairpinNet(f).Mask.Size(); ones == 0 {
				hairpin = base + " -j " + r.setMark // a /0 "subnet": iptables prints no -s
			}
			r.rules = append(r.rules, hairpin)
			if old := "-s " + host + " " + base + " -j " + r.setMark; old != hairpin {
				r.alts[hairpin] = []string{old} // what cniforge before issue 22 wrote
			}
			if f == nftnl.IPv4 {
				r.rules = append(r.rules, "-s 127.0.0.1/32 "+base+" -j "+r.setMark)
			}
		}
		r.rules = append(r.rules, base+" -j DNAT --to-destination "+ipPort(cip, m.ContainerPort))
		if !slices.Contains(protos, m.Protocol) {
			protos = append(protos, m.Protocol)
		}
		if !slices.Contains(ports[m.Protocol], m.HostPort) {
			ports[m.Protocol] = append(ports[m.Protocol], m.HostPort)
		}
	}
	r.ports = ports
	comment := iptables.SaveQuote(pmComment(o))
	for _, proto := range protos {
		for group := range slices.Chunk(ports[proto], pmMultiportMax) {
			r.entries = append(r.entries, fmt.Sprintf("-p %s -m comment --comment %s -m multiport --dports %s -j %s",
				proto, comment, joinInts(group), r.chain))
		}
	}
	return r
}

func (r pmRules) entryJump() string {
	if len(r.conds) > 0 {
		return strings.Join(r.conds, " ") + " -m addrtype --dst-type LOCAL -j " + pmDNATChain
	}
	return "-m addrtype --dst-type LOCAL -j " + pmDNATChain
}

// hasJump reports whether chain of t jumps to target (any conditions).
func hasJump(t iptables.NatTable, chain, target string) bool {
	return slices.ContainsFunc(t.Rules[chain], func(s string) bool { return jumpsTo(s, target) })
}

// jumpsTo reports whether rule spec s ends in a jump to target.
func jumpsTo(s, target string) bool {
	return s == "-j "+target || strings.HasSuffix(s, " -j "+target)
}

// sharedLines creates what every attachment shares, where missing.
func (r pmRules) sharedLines(nat iptables.NatTable) []string {
	var l []string
	if !nat.Chains[pmDNATChain] {
		l = append(l, "-N "+pmDNATChain)
	}
	for _, c := range []string{"PREROUTING", "OUTPUT"} {
		if !hasJump(nat, c, pmDNATChain) {
			l = append(l, "-A "+c+" "+r.entryJump())
		}
	}
	if r.snat && r.ownMark {
		// The chain and its rule: a flushed chain is as broken as a
		// missing one, and every ADD puts the rule back, as upstream's
		// (issue 29). Any rule doing the same counts, however written.
		if !nat.Chains[pmSetMarkChain] {
			l = append(l, "-N "+pmSetMarkChain)
		}
		if !slices.ContainsFunc(nat.Rules[pmSetMarkChain], r.isSetMark) {
			l = append(l, `-A `+pmSetMarkChain+` -m comment --comment "CNI portfwd masquerade mark" -j MARK --set-xmark `+r.mark)
		}
		if !nat.Chains[pmMasqChain] {
			l = append(l, "-N "+pmMasqChain)
		}
		if !slices.ContainsFunc(nat.Rules[pmMasqChain], r.isMarkMasq) {
			l = append(l, "-A "+pmMasqChain+" -m mark --mark "+r.mark+" -j MASQUERADE")
		}
		// Inserted first, as upstream does: bridge's and ptp's masquerade
		// chains ACCEPT traffic to the container's own subnet, which ends
		// POSTROUTING before a later jump, so a container reaching its own
		// host port (hairpin) would go unmasqueraded and get no answer.
		// Podman's default network (bridge, portmap) showed it.
		if !hasJump(nat, "POSTROUTING", pmMasqChain) {
			l = append(l, `-I POSTROUTING 1 -m comment --comment "CNI portfwd requiring masquerade" -j `+pmMasqChain)
		}
	}
	return l
}

// isSetMark reports whether rule spec s sets r's mark unconditionally
// (any comment).
func (r pmRules) isSetMark(s string) bool {
	return strings.HasSuffix(s, "-j MARK --set-xmark "+r.mark) &&
		!strings.Contains(s, " -s ") && !strings.Contains(s, " -d ") && !strings.HasPrefix(s, "-s ") && !strings.HasPrefix(s, "-d ")
}

// isMarkMasq reports whether rule spec s masquerades what carries r's mark.
func (r pmRules) isMarkMasq(s string) bool {
	return strings.Contains(s, "-m mark --mark "+r.mark+" ") && (strings.HasSuffix(s, "-j MASQUERADE") || strings.Contains(s, "-j MASQUERADE "))
}

const pmGuardRule = `-d 127.0.0.0/8 ! -i lo -m comment --comment "CNI portfwd route_localnet guard" -j DROP`

func (r pmRules) guardLines(raw iptables.NatTable) []string {
	if !r.guard {
		return nil
	}
	var l []string
	if !raw.Chains[pmGuardChain] {
		l = append(l, "-N "+pmGuardChain, "-A "+pmGuardChain+" "+pmGuardRule)
	}
	if !hasJump(raw, "PREROUTING", pmGuardChain) {
		l = append(l, "-A PREROUTING -j "+pmGuardChain)
	}
	return l
}

// entriesTo returns the CNI-HOSTPORT-DNAT rules jumping to chain.
func entriesTo(nat iptables.NatTable, chain string) []string {
	var out []string
	for _, s := range nat.Rules[pmDNATChain] {
		if jumpsTo(s, chain) {
			out = append(out, s)
		}
	}
	return out
}

// removeLines deletes chain and the entries jumping to it.
func removeLines(nat iptables.NatTable, chain string) []string {
	var l []string
	for _, e := range entriesTo(nat, chain) {
		l = append(l, "-D "+pmDNATChain+" "+e)
	}
	if nat.Chains[chain] {
		l = append(l, "-F "+chain, "-X "+chain)
	}
	return l
}

// attachLines makes nat hold exactly r for its chain.
func (r pmRules) attachLines(nat iptables.NatTable) []string {
	var l []string
	if nat.Chains[r.chain] && slices.Equal(nat.Rules[r.chain], r.rules) && slices.Equal(entriesTo(nat, r.chain), r.entries) {
		return nil
	}
	if nat.Chains[r.chain] {
		if in, ok := r.attachInPlace(nat); ok {
			return in
		}
	}
	for _, e := range entriesTo(nat, r.chain) {
		l = append(l, "-D "+pmDNATChain+" "+e)
	}
	l = append(l, ":"+r.chain+" - [0:0]") // declares or flushes it
	for _, s := range r.rules {
		l = append(l, "-A "+r.chain+" "+s)
	}
	for _, e := range r.entries {
		l = append(l, "-A "+pmDNATChain+" "+e)
	}
	return l
}

// attachInPlace is attachLines for an existing chain whose rules are
// r's in r's order with some missing (a repeated ADD after a drift, check
// --repair: issue 29): the missing rules are inserted where they belong
// and the missing entries appended, so that no rule that is there, nor
// its counters, is touched. ok is false for anything else (a rule that is
// not r's, one out of order): attachLines then rewrites the chain, in the
// same one transaction.
func (r pmRules) attachInPlace(nat iptables.NatTable) (lines []string, ok bool) {
	have := nat.Rules[r.chain]
	next := 0 // the next rule of have to meet in r.rules
	for i, s := range r.rules {
		if next < len(have) && have[next] == s {
			next++
			continue
		}
		if slices.Contains(have, s) {
			return nil, false // out of order
		}
		lines = append(lines, fmt.Sprintf("-I %s %d %s", r.chain, i+1, s))
	}
	if next != len(have) {
		return nil, false // a rule that is not r's
	}
	entries := entriesTo(nat, r.chain)
	for _, e := range entries {
		if !slices.Contains(r.entries, e) {
			lines = append(lines, "-D "+pmDNATChain+" "+e)
		}
	}
	for _, e := range r.entries {
		if !slices.Contains(entries, e) {
			lines = append(lines, "-A "+pmDNATChain+" "+e)
		}
	}
	return lines, true
}

// tablesPayload builds one iptables-restore --noflush input for several
// tables: one transaction per table, all or nothing within each.
func tablesPayload(tables map[string][]string) []byte {
	var b bytes.Buffer
	for _, name := range []string{"raw", "nat"} {
		if len(tables[name]) == 0 {
			continue
		}
		b.WriteString("*" + name + "\n")
		for _, l := range tables[name] {
			b.WriteString(l + "\n")
		}
		b.WriteString("COMMIT\n")
	}
	return b.Bytes()
}

var entryPortsRE = iptables.NewLazyRE(`^-p (\S+) .*--dports (\S+) `)

// entryPorts returns the host ports per protocol that entries (rules of
// CNI-HOSTPORT-DNAT) send on. CHECK asks only that each mapped port is
// among them: upstream 1.1.1 also lists an IPv4 hostIP's port in the IPv6
// entry, and groups may differ.
func entryPorts(entries []string) map[string]map[int]bool {
	out := map[string]map[int]bool{}
	for _, e := range entries {
		m := entryPortsRE.FindStringSubmatch(e)
		if m == nil {
			continue
		}
		if out[m[1]] == nil {
			out[m[1]] = map[int]bool{}
		}
		for _, p := range strings.Split(m[2], ",") {
			lo, hi, isRange := strings.Cut(p, ":")
			a, err := strconv.Atoi(lo)
			if err != nil {
				continue
			}
			b := a
			if isRange {
				if b, err = strconv.Atoi(hi); err != nil {
					continue
				}
			}
			for port := a; port <= b && port <= 65535; port++ {
				out[m[1]][port] = true
			}
		}
	}
	return out
}

var dnatTargetRE = iptables.NewLazyRE(`-j DNAT --to-destination \[?([0-9a-fA-F.:]+?)\]?:\d+$`)
