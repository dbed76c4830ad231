package netfilter

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

// MacSpoofCheck drops frames entering a bridge through a container's port
// whose source MAC is not the container's. It works on nftables over
// netlink (no nft process) in the network namespace of the calling thread:
//
//	table bridge cni_plugins_macspoof
//	  chain prerouting  (filter hook prerouting priority -300)
//	    iifname "<port>" jump <attachment chain>   comment nftComment(owner)
//	  chain cni-br-iface-<owner hash>
//	    ether saddr <mac> return
//	    drop
//
// Setup and Teardown are one batch each, applied entirely or not at all.
type MacSpoofCheck struct {
	Owner Owner
	Port  string           // the host end of the container's veth
	MAC   net.HardwareAddr // the container interface's MAC
}

const (
	macspoofTableName = "cni_plugins_macspoof"
	macspoofBaseChain = "prerouting"
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

func macspoofChainName(o Owner) string { return "cni-br-iface-" + nftOwnerHash(o) }

// Setup installs the check, replacing an earlier one of the same owner.
func (m MacSpoofCheck) Setup() error {
	if len(m.MAC) != 6 {
		return fmt.Errorf("mac spoof check for %s: MAC %q is not 6 bytes", m.Owner, m.MAC)
	}
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables netlink: %w: %w", ErrUnavailable, err)
	}
	hash := nftOwnerHash(m.Owner)
	c.AddTable(macspoofTable)
	base := c.AddChain(macspoofBase())
	if err := deleteMacspoofJumps(c, base, hash); err != nil {
		return err
	}
	own := &nftables.Chain{Name: macspoofChainName(m.Owner), Table: macspoofTable}
	c.AddChain(own)
	c.FlushChain(own)
	c.AddRule(&nftables.Rule{Table: macspoofTable, Chain: own, Exprs: []expr.Any{
		// ether saddr: 6 bytes at offset 6 of the link-layer header.
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseLLHeader, Offset: 6, Len: 6},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte(m.MAC)},
		&expr.Verdict{Kind: expr.VerdictReturn},
	}})
	c.AddRule(&nftables.Rule{Table: macspoofTable, Chain: own, Exprs: []expr.Any{
		&expr.Verdict{Kind: expr.VerdictDrop},
	}})
	c.AddRule(&nftables.Rule{Table: macspoofTable, Chain: base, UserData: userdata.AppendString(nil, userdata.TypeComment, nftComment(m.Owner)),
		Exprs: []expr.Any{
			&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifnameBytes(m.Port)},
			&expr.Verdict{Kind: expr.VerdictJump, Chain: own.Name},
		}})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("set up mac spoof check for %s on %q: %w", m.Owner, m.Port, err)
	}
	return nil
}

// ifnameBytes is an interface name as nftables compares it: IFNAMSIZ bytes,
// NUL padded.
func ifnameBytes(name string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return b
}

// deleteMacspoofJumps queues the deletion of the base chain's rules that
// carry hash. A base chain that does not exist yet has none.
func deleteMacspoofJumps(c *nftables.Conn, base *nftables.Chain, hash string) error {
	exists, err := macspoofChainExists(c, macspoofBaseChain)
	if err != nil || !exists {
		return err
	}
	rules, err := c.GetRules(macspoofTable, base)
	if err != nil {
		// google/nftables flattens the kernel's error into text here, so
		// ENOENT cannot be told apart: ask again whether the chain is
		// still there (another teardown may have removed it).
		if exists, eerr := macspoofChainExists(c, macspoofBaseChain); eerr == nil && !exists {
			return nil
		}
		return fmt.Errorf("list rules of bridge %s %s: %w", macspoofTableName, macspoofBaseChain, err)
	}
	for _, r := range rules {
		if got, _, ok := macspoofOwner(r); ok && got == hash {
			if err := c.DelRule(r); err != nil {
				return err
			}
		}
	}
	return nil
}

func macspoofChainExists(c *nftables.Conn, name string) (bool, error) {
	ch, err := macspoofChain(c, name)
	return ch != nil, err
}

// macspoofChain returns the chain of our table named name as the kernel
// reports it, nil when there is none.
func macspoofChain(c *nftables.Conn, name string) (*nftables.Chain, error) {
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyBridge)
	if err != nil {
		return nil, fmt.Errorf("list bridge chains: %w", nftUnsupported(err))
	}
	for _, ch := range chains {
		if ch.Table != nil && ch.Table.Name == macspoofTableName && ch.Name == name {
			return ch, nil
		}
	}
	return nil, nil
}

// TeardownMacSpoofCheck removes the check of o. Absent rules, an absent
// table and a kernel without nf_tables are success; any other nftables
// error is returned (issue 8, defect 9: a DEL must not report success while
// the rules may still be there).
func TeardownMacSpoofCheck(o Owner) error {
	// The batch fails as a whole with ENOENT when something it deletes
	// went meanwhile (a concurrent teardown of the same owner): read again.
	const attempts = 3
	for i := 1; ; i++ {
		err := teardownMacSpoofOnce(o)
		switch {
		case err == nil, errors.Is(err, ErrUnavailable):
			return nil // no nf_tables here, so no rules either
		case !errors.Is(err, unix.ENOENT) || i == attempts:
			return fmt.Errorf("tear down mac spoof check for %s in bridge %s: %w", o, macspoofTableName, err)
		}
	}
}

func teardownMacSpoofOnce(o Owner) error {
	c, err := nftables.New() // not lasting: cannot fail
	if err != nil {
		return err
	}
	own, err := macspoofChainExists(c, macspoofChainName(o))
	if err != nil {
		return err
	}
	if err := deleteMacspoofJumps(c, macspoofBase(), nftOwnerHash(o)); err != nil {
		return err
	}
	if own {
		ch := &nftables.Chain{Name: macspoofChainName(o), Table: macspoofTable}
		c.FlushChain(ch)
		c.DelChain(ch)
	}
	return c.Flush() // an empty batch sends nothing
}

// Check verifies, read-only, that the check of m is installed: the jump
// from the base chain for m.Port (it is what sends the port's frames to the
// check), and the attachment chain returning for m.MAC and dropping the
// rest. The error wraps ErrMissing and names every missing rule.
func (m MacSpoofCheck) Check() error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables netlink: %w: %w", ErrUnavailable, err)
	}
	name := macspoofChainName(m.Owner)
	where := "table bridge " + macspoofTableName
	for _, name := range []string{macspoofBaseChain, name} {
		ch, err := macspoofChain(c, name)
		if err != nil {
			return err
		}
		if ch == nil {
			return fmt.Errorf("mac spoof check of %s: %w: %s chain %s", m.Owner, ErrMissing, where, name)
		}
		// A chain of that name that is not a filter chain on the bridge
		// prerouting hook sees no frame: the check would do nothing.
		if name == macspoofBaseChain && (ch.Hooknum == nil || *ch.Hooknum != *nftables.ChainHookPrerouting || ch.Type != nftables.ChainTypeFilter) {
			return fmt.Errorf("mac spoof check of %s: %w: %s chain %s as a filter prerouting chain", m.Owner, ErrMissing, where, name)
		}
	}
	base, err := c.GetRules(macspoofTable, macspoofBase())
	if err != nil {
		return fmt.Errorf("list rules of bridge %s %s: %w", macspoofTableName, macspoofBaseChain, err)
	}
	own, err := c.GetRules(macspoofTable, &nftables.Chain{Name: name, Table: macspoofTable})
	if err != nil {
		return fmt.Errorf("list rules of bridge %s %s: %w", macspoofTableName, name, err)
	}
	var miss []error
	hash := nftOwnerHash(m.Owner)
	if !slices.ContainsFunc(base, func(r *nftables.Rule) bool {
		h, _, ok := macspoofOwner(r)
		return ok && h == hash && isMacspoofJump(r, m.Port, name)
	}) {
		miss = append(miss, fmt.Errorf("%w: %s chain %s: iifname %q jump %s", ErrMissing, where, macspoofBaseChain, m.Port, name))
	}
	if !slices.ContainsFunc(own, func(r *nftables.Rule) bool { return isMacReturn(r, m.MAC) }) {
		miss = append(miss, fmt.Errorf("%w: %s chain %s: ether saddr %s return", ErrMissing, where, name, m.MAC))
	}
	if len(own) == 0 || !isDrop(own[len(own)-1]) {
		miss = append(miss, fmt.Errorf("%w: %s chain %s: drop (last)", ErrMissing, where, name))
	}
	if len(miss) > 0 {
		return fmt.Errorf("mac spoof check of %s: %w", m.Owner, errors.Join(miss...))
	}
	return nil
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
	v, ok3 := r.Exprs[2].(*expr.Verdict)
	return ok1 && ok2 && ok3 &&
		meta.Key == expr.MetaKeyIIFNAME && !meta.SourceRegister && cmp.Register == meta.Register &&
		cmp.Op == expr.CmpOpEq && string(bytes.TrimRight(cmp.Data, "\x00")) == port &&
		v.Kind == expr.VerdictJump && v.Chain == chain
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

// macspoofOwner reads the owner hash and network from a jump rule's comment.
func macspoofOwner(r *nftables.Rule) (hash, network string, ok bool) {
	c, ok := userdata.GetString(r.UserData, userdata.TypeComment)
	if !ok {
		return "", "", false
	}
	return parseNFTComment(c)
}

// GCMacSpoofChecks removes the checks of network whose owner is not in keep
// (owners of other networks in keep are ignored). A kernel without
// nf_tables, or without the table, holds none; other nftables errors are
// returned.
func GCMacSpoofChecks(network string, keep []Owner) error {
	c, err := nftables.New() // not lasting: cannot fail
	if err != nil {
		return fmt.Errorf("collect mac spoof checks of network %q: %w", network, err)
	}
	exists, err := macspoofChainExists(c, macspoofBaseChain)
	if errors.Is(err, ErrUnavailable) {
		return nil // no nf_tables here, so no rules either
	}
	if err != nil {
		return fmt.Errorf("collect mac spoof checks of network %q: %w", network, err)
	}
	if !exists {
		return nil // never set up here
	}
	kept := map[string]bool{}
	for _, o := range keep {
		if o.Network == network {
			kept[nftOwnerHash(o)] = true
		}
	}
	rules, err := c.GetRules(macspoofTable, macspoofBase())
	if err != nil {
		return fmt.Errorf("list rules of bridge %s %s: %w", macspoofTableName, macspoofBaseChain, err)
	}
	dead := 0
	for _, r := range rules {
		hash, nw, ok := macspoofOwner(r)
		if !ok || nw != network || kept[hash] {
			continue
		}
		if err := c.DelRule(r); err != nil {
			return err
		}
		ch := &nftables.Chain{Name: "cni-br-iface-" + hash, Table: macspoofTable}
		c.FlushChain(ch)
		c.DelChain(ch)
		dead++
	}
	if dead == 0 {
		return nil
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("collect mac spoof checks of network %q in bridge %s: %w", network, macspoofTableName, err)
	}
	return nil
}
