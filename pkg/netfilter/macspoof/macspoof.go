package macspoof

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// MacSpoofCheck drops frames entering a bridge through a container's port
// whose source MAC is not the container's. It works on nftables over
// netlink (no nft process) in the network namespace of the calling thread,
// in upstream's layout, so that a node can switch suites with pods running
// (ref is "<containerID>-<ifname>"):
//
//	table bridge nat
//	  chain PREROUTING  (type filter hook prerouting priority -300; policy accept)
//	    jump cni-br-iface-<ref>                       comment "macspoofchk-<ref>"
//	  chain cni-br-iface-<ref>
//	    iifname "<port>" jump cni-br-iface-<ref>-mac  comment "macspoofchk-<ref>"
//	  chain cni-br-iface-<ref>-mac
//	    ether saddr <mac> return                      comment "macspoofchk-<ref>"
//	    drop                                          comment "macspoofchk-<ref>"
//
// The table and base chain are ebtables-nft's nat ones, shared. Setup and
// Teardown are one batch each, applied entirely or not at all. Teardown,
// Check and GC also find checks in the layout of our earlier releases (see
// legacy.go).
type MacSpoofCheck struct {
	Owner netfilter.Owner
	Port  string           // the host end of the container's veth
	MAC   net.HardwareAddr // the container interface's MAC
}

const (
	macspoofTableName = "nat"
	macspoofBaseChain = "PREROUTING"
)

var macspoofTable = &nftables.Table{Family: nftables.TableFamilyBridge, Name: macspoofTableName}

func macspoofBase() *nftables.Chain {
	prio := nftables.ChainPriority(-300)
	accept := nftables.ChainPolicyAccept
	return &nftables.Chain{
		Name: macspoofBaseChain, Table: macspoofTable, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: &prio, Policy: &accept,
	}
}

// ErrBaseChainConflict is returned (wrapped) by MacSpoofCheck.Setup when
// the host's bridge nat PREROUTING chain exists but is not the base chain
// the check needs: one on another hook, of another type or priority, or a
// regular chain sees no forwarded frame (or not before the others), so a
// jump there would leave the check silently ineffective (issue 22, defect
// 3). Setup does not change a chain it did not make.
var ErrBaseChainConflict = errors.New("the mac spoof check would not see every frame entering the bridge")

// macspoofBaseMismatch describes how ch, the chain listed under the base
// chain's name, differs from macspoofBase: "" when it does not.
func macspoofBaseMismatch(ch *nftables.Chain) string {
	want := macspoofBase()
	if ch.Hooknum == nil {
		return "a regular chain (no hook)"
	}
	prio := "?"
	if ch.Priority != nil {
		prio = fmt.Sprint(*ch.Priority)
	}
	if ch.Type != want.Type || *ch.Hooknum != *want.Hooknum || ch.Priority == nil || *ch.Priority != *want.Priority {
		return fmt.Sprintf("type %s hook %s priority %s", ch.Type, bridgeHookName(*ch.Hooknum), prio)
	}
	return ""
}

// macspoofBaseWant is macspoofBase as nft writes it.
const macspoofBaseWant = "type filter hook prerouting priority -300"

// bridgeHookName names a bridge family hook as nft does.
func bridgeHookName(h nftables.ChainHook) string {
	names := []string{"prerouting", "input", "forward", "output", "postrouting"}
	if int(h) < len(names) {
		return names[h]
	}
	return fmt.Sprintf("hook%d", h)
}

func macspoofRef(o netfilter.Owner) string          { return o.ContainerID + "-" + o.IfName }
func MacspoofComment(o netfilter.Owner) string      { return "macspoofchk-" + macspoofRef(o) }
func MacspoofChainName(o netfilter.Owner) string    { return "cni-br-iface-" + macspoofRef(o) }
func macspoofMACChainName(o netfilter.Owner) string { return MacspoofChainName(o) + "-mac" }
func macspoofUserData(o netfilter.Owner) []byte {
	return userdata.AppendString(nil, userdata.TypeComment, MacspoofComment(o))
}
func ruleComment(r *nftables.Rule) string {
	c, _ := userdata.GetString(r.UserData, userdata.TypeComment)
	return c
}
func chainIn(name string) *nftables.Chain   { return &nftables.Chain{Name: name, Table: macspoofTable} }
func macspoofRefOf(comment string) string   { return strings.TrimPrefix(comment, "macspoofchk-") }
func isMacspoofComment(comment string) bool { return strings.HasPrefix(comment, "macspoofchk-") }

// nftChainNameMax is NFT_CHAIN_MAXNAMELEN less the terminating NUL.
const nftChainNameMax = 255

// Setup installs the check, replacing an earlier one of the same owner
// (in either layout).
func (m MacSpoofCheck) Setup() error {
	if len(m.MAC) != 6 {
		return fmt.Errorf("mac spoof check for %s: MAC %q is not 6 bytes", m.Owner, m.MAC)
	}
	if n := len(macspoofMACChainName(m.Owner)); n > nftChainNameMax {
		return fmt.Errorf("mac spoof check for %s: chain name %q is %d bytes, more than nftables' %d", m.Owner, macspoofMACChainName(m.Owner), n, nftChainNameMax)
	}
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables netlink: %w: %w", netfilter.ErrUnavailable, err)
	}
	// An existing base chain is not declared again: that would be an
	// update, whose cleanup every nfnetlink socket's close then waits for
	// (see nftnl/conn.go). Should it have gone since it was listed (the table
	// removed by hand), the batch fails and goes once more declaring it.
	sawBase, err := m.setupOnce(c, false)
	if err != nil && sawBase {
		_, err = m.setupOnce(c, true)
	}
	return err
}

// setupOnce reads, queues and commits Setup's batch, declaring the base
// chain when the table lacks it or declareBase says so. It reports whether
// the base chain was there.
func (m MacSpoofCheck) setupOnce(c *nftables.Conn, declareBase bool) (sawBase bool, err error) {
	chains, err := queueMacspoofTeardown(c, m.Owner)
	if err != nil {
		return false, fmt.Errorf("set up mac spoof check for %s: %w", m.Owner, err)
	}
	if b := chains[macspoofBaseChain]; b != nil {
		if have := macspoofBaseMismatch(b); have != "" {
			return false, fmt.Errorf("set up mac spoof check for %s: table bridge %s chain %s is %q, not %q: %w",
				m.Owner, macspoofTableName, macspoofBaseChain, have, macspoofBaseWant, ErrBaseChainConflict)
		}
	}
	o, ud := m.Owner, macspoofUserData(m.Owner)
	c.AddTable(macspoofTable)
	base := macspoofBase()
	sawBase = chains[macspoofBaseChain] != nil
	if !sawBase || declareBase {
		base = c.AddChain(base)
	}
	iface := c.AddChain(chainIn(MacspoofChainName(o)))
	mac := c.AddChain(chainIn(macspoofMACChainName(o)))
	c.AddRule(&nftables.Rule{Table: macspoofTable, Chain: mac, UserData: ud, Exprs: []expr.Any{
		// ether saddr: 6 bytes at offset 6 of the link-layer header.
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseLLHeader, Offset: 6, Len: 6},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte(m.MAC)},
		&expr.Verdict{Kind: expr.VerdictReturn},
	}})
	c.AddRule(&nftables.Rule{Table: macspoofTable, Chain: mac, UserData: ud, Exprs: []expr.Any{
		&expr.Verdict{Kind: expr.VerdictDrop},
	}})
	c.AddRule(&nftables.Rule{Table: macspoofTable, Chain: iface, UserData: ud, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifnameBytes(m.Port)},
		&expr.Verdict{Kind: expr.VerdictJump, Chain: mac.Name},
	}})
	c.AddRule(&nftables.Rule{Table: macspoofTable, Chain: base, UserData: ud, Exprs: []expr.Any{
		&expr.Verdict{Kind: expr.VerdictJump, Chain: iface.Name},
	}})
	if err := c.Flush(); err != nil {
		return sawBase, fmt.Errorf("set up mac spoof check for %s on %q in bridge %s: %w", m.Owner, m.Port, macspoofTableName, err)
	}
	return sawBase, nil
}

// ifnameBytes is an interface name as nftables compares it: IFNAMSIZ bytes,
// NUL padded.
func ifnameBytes(name string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return b
}

// bridgeChains returns the chains of the bridge table named table, by name,
// as the kernel reports them (empty when there is no such table).
func bridgeChains(c *nftables.Conn, table string) (map[string]*nftables.Chain, error) {
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyBridge)
	if err != nil {
		return nil, fmt.Errorf("list bridge chains: %w", nftnl.NftUnsupported(err))
	}
	out := map[string]*nftables.Chain{}
	for _, ch := range chains {
		if ch.Table != nil && ch.Table.Name == table {
			out[ch.Name] = ch
		}
	}
	return out, nil
}

// queueMacspoofTeardown queues in c the removal of o's check, in both
// layouts: the base chain's rules with o's comment, then o's chains. It
// returns the chains of the table as it listed them.
func queueMacspoofTeardown(c *nftables.Conn, o netfilter.Owner) (map[string]*nftables.Chain, error) {
	chains, err := bridgeChains(c, macspoofTableName)
	if err != nil {
		return nil, err
	}
	if chains[macspoofBaseChain] != nil {
		rules, err := c.GetRules(macspoofTable, macspoofBase())
		if err != nil {
			return nil, fmt.Errorf("list rules of bridge %s %s: %w", macspoofTableName, macspoofBaseChain, err)
		}
		for _, r := range rules {
			if ruleComment(r) == MacspoofComment(o) {
				if err := c.DelRule(r); err != nil {
					return nil, err
				}
			}
		}
	}
	queueMacspoofChainsDelete(c, chains, macspoofRef(o))
	legacy, err := bridgeChains(c, LegacyMacspoofTableName)
	if err != nil {
		return nil, err
	}
	return chains, queueLegacyMacspoofTeardown(c, legacy, o)
}

// queueMacspoofChainsDelete queues the deletion of the chains of ref that
// exist, the jumping one first.
func queueMacspoofChainsDelete(c *nftables.Conn, chains map[string]*nftables.Chain, ref string) {
	for _, name := range []string{"cni-br-iface-" + ref, "cni-br-iface-" + ref + "-mac"} {
		if chains[name] != nil {
			c.FlushChain(chainIn(name))
			c.DelChain(chainIn(name))
		}
	}
}

// TeardownMacSpoofCheck removes the check of o, in either layout. Absent
// rules, an absent table and a kernel without nf_tables are success; any
// other nftables error is returned (issue 8, defect 9: a DEL must not report
// success while the rules may still be there).
func TeardownMacSpoofCheck(o netfilter.Owner) error {
	// The batch fails as a whole with ENOENT when something it deletes
	// went meanwhile (a concurrent teardown of the same owner): read again.
	const attempts = 3
	for i := 1; ; i++ {
		err := teardownMacSpoofOnce(o)
		switch {
		case err == nil, errors.Is(err, netfilter.ErrUnavailable):
			return nil // no nf_tables here, so no rules either
		case !errors.Is(err, unix.ENOENT) || i == attempts:
			return fmt.Errorf("tear down mac spoof check for %s in bridge %s: %w", o, macspoofTableName, err)
		}
	}
}

func teardownMacSpoofOnce(o netfilter.Owner) error {
	if !macspoofTablesMayExist() {
		return nil
	}
	c, err := nftables.New() // not lasting: cannot fail
	if err != nil {
		return err
	}
	if _, err := queueMacspoofTeardown(c, o); err != nil {
		return err
	}
	return c.Flush() // an empty batch sends nothing
}

// macspoofTablesMayExist asks for the two bridge tables by name on the
// shared request socket. Every bridge DEL tears the check down whether
// macspoofchk was set or not, and the listings of the teardown open and
// close a socket each (see nftnl/conn.go for what that costs); without either
// table there is nothing to list. Any doubt (an error) says they may.
func macspoofTablesMayExist() bool {
	nl, done, err := nftnl.RequestConn()
	if err != nil {
		return true
	}
	defer done()
	for _, t := range []string{macspoofTableName, LegacyMacspoofTableName} {
		if there, err := nftnl.NftTableExistsIn(nl, nftables.TableFamilyBridge, t); there || err != nil {
			return true
		}
	}
	return false
}

// Check verifies, read-only, that the check of m is installed: the base
// chain's jump, the port's jump and the MAC chain returning for m.MAC and
// dropping the rest. A check in our earlier layout passes too. The error
// wraps ErrMissing and names every missing rule.
func (m MacSpoofCheck) Check() error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables netlink: %w: %w", netfilter.ErrUnavailable, err)
	}
	err = m.check(c)
	if errors.Is(err, netfilter.ErrMissing) && m.checkLegacy(c) == nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mac spoof check of %s: %w", m.Owner, err)
	}
	return nil
}

func (m MacSpoofCheck) check(c *nftables.Conn) error {
	chains, err := bridgeChains(c, macspoofTableName)
	if err != nil {
		return err
	}
	where := "table bridge " + macspoofTableName
	iface, mac := MacspoofChainName(m.Owner), macspoofMACChainName(m.Owner)
	for _, name := range []string{macspoofBaseChain, iface, mac} {
		if chains[name] == nil {
			return fmt.Errorf("%w: %s chain %s", netfilter.ErrMissing, where, name)
		}
	}
	// A base chain that is not a filter chain on the bridge prerouting hook
	// sees no frame: the check would do nothing.
	if have := macspoofBaseMismatch(chains[macspoofBaseChain]); have != "" {
		return fmt.Errorf("%w: %s chain %s as a filter prerouting chain (%s), not %s", netfilter.ErrMissing, where, macspoofBaseChain, macspoofBaseWant, have)
	}
	rules := map[string][]*nftables.Rule{}
	for _, name := range []string{macspoofBaseChain, iface, mac} {
		if rules[name], err = c.GetRules(macspoofTable, chainIn(name)); err != nil {
			return fmt.Errorf("list rules of bridge %s %s: %w", macspoofTableName, name, err)
		}
	}
	var miss []error
	if !slices.ContainsFunc(rules[macspoofBaseChain], func(r *nftables.Rule) bool { return isJump(r.Exprs, iface) }) {
		miss = append(miss, fmt.Errorf("%w: %s chain %s: jump %s", netfilter.ErrMissing, where, macspoofBaseChain, iface))
	}
	if !slices.ContainsFunc(rules[iface], func(r *nftables.Rule) bool { return isMacspoofJump(r, m.Port, mac) }) {
		miss = append(miss, fmt.Errorf("%w: %s chain %s: iifname %q jump %s", netfilter.ErrMissing, where, iface, m.Port, mac))
	}
	own := rules[mac]
	if !slices.ContainsFunc(own, func(r *nftables.Rule) bool { return isMacReturn(r, m.MAC) }) {
		miss = append(miss, fmt.Errorf("%w: %s chain %s: ether saddr %s return", netfilter.ErrMissing, where, mac, m.MAC))
	}
	if len(own) == 0 || !isDrop(own[len(own)-1]) {
		miss = append(miss, fmt.Errorf("%w: %s chain %s: drop (last)", netfilter.ErrMissing, where, mac))
	}
	return errors.Join(miss...)
}

func isJump(es []expr.Any, chain string) bool {
	if len(es) != 1 {
		return false
	}
	v, ok := es[0].(*expr.Verdict)
	return ok && v.Kind == expr.VerdictJump && v.Chain == chain
}

// isMacspoofJump reports whether r is `iifname "<port>" jump <chain>`. The
// name compares NUL-trimmed: nft pads it to its own length, Setup to
// IFNAMSIZ.
func isMacspoofJump(r *nftables.Rule, port, chain string) bool {
	if len(r.Exprs) != 3 {
		return false
	}
	meta, ok1 := r.Exprs[0].(*expr.Meta)
	cmp, ok2 := r.Exprs[1].(*expr.Cmp)
	return ok1 && ok2 &&
		meta.Key == expr.MetaKeyIIFNAME && !meta.SourceRegister && cmp.Register == meta.Register &&
		cmp.Op == expr.CmpOpEq && string(bytes.TrimRight(cmp.Data, "\x00")) == port &&
		isJump(r.Exprs[2:], chain)
}

// macspoofPort returns the port an iface chain's rules match, "" if none.
func macspoofPort(rs []*nftables.Rule) string {
	for _, r := range rs {
		if len(r.Exprs) == 3 {
			meta, ok1 := r.Exprs[0].(*expr.Meta)
			cmp, ok2 := r.Exprs[1].(*expr.Cmp)
			if ok1 && ok2 && meta.Key == expr.MetaKeyIIFNAME {
				return string(bytes.TrimRight(cmp.Data, "\x00"))
			}
		}
	}
	return ""
}

// isMacReturn reports whether r is `ether saddr <mac> return`.
func isMacReturn(r *nftables.Rule, mac net.HardwareAddr) bool {
	if len(r.Exprs) != 3 {
		return false
	}
	p, ok1 := r.Exprs[0].(*expr.Payload)
	cmp, ok2 := r.Exprs[1].(*expr.Cmp)
	v, ok3 := r.Exprs[2].(*expr.Verdict)
	return ok1 && ok2 && ok3 &&
		p.OperationType == expr.PayloadLoad && p.Base == expr.PayloadBaseLLHeader && p.Offset == 6 && p.Len == 6 &&
		cmp.Register == p.DestRegister && cmp.Op == expr.CmpOpEq && bytes.Equal(cmp.Data, mac) &&
		v.Kind == expr.VerdictReturn
}

func isDrop(r *nftables.Rule) bool {
	if len(r.Exprs) != 1 {
		return false
	}
	v, ok := r.Exprs[0].(*expr.Verdict)
	return ok && v.Kind == expr.VerdictDrop
}
