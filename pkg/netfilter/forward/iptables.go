package forward

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// iptablesForward is the iptables backend of the forward filter. It shares
// iptablesMasq's binaries, process runner and chain locks; every change of
// one family is one iptables-restore --noflush of the filter table. On
// iptables-nft, Check reads over netlink (checkNFT) and starts
// iptables-save only when something is missing, and an ADD beside other
// attachments appends its rules over netlink (iptnftadd.go).
type iptablesForward struct {
	ipt *iptables.Runner
	// failFamily, when set, is asked before each family's change whether
	// it shall fail (tests: a later family's failure after an earlier one
	// went through).
	failFamily func(f nftnl.Family) error
}

func newIPTablesForward() *iptablesForward { return &iptablesForward{ipt: &iptables.Runner{}} }

func (m *iptablesForward) Backend() string { return netfilter.BackendIPTables }

const (
	fwdChain      = "CNI-FORWARD"
	isoStage1     = "CNI-ISOLATION-STAGE-1"
	isoStage2     = "CNI-ISOLATION-STAGE-2"
	fwdJumpSpec   = `-m comment --comment "CNI firewall plugin rules" -j ` + fwdChain
	fwdLockName   = "filter/" + fwdChain
	fwdAdminExtra = `-m comment --comment "CNI firewall plugin admin overrides" -j `
)

func fwdAdminSpec(admin string) string { return fwdAdminExtra + admin }

func isoJumpSpec(p IngressPolicy) string {
	return fmt.Sprintf(`-m comment --comment "CNI firewall plugin rules (ingressPolicy: %s)" -j %s`, p, isoStage1)
}

func hostPrefix(ip net.IP) string {
	if ip.To4() != nil {
		return ip.To4().String() + "/32"
	}
	return ip.String() + "/128"
}

// fwdOwnSpecs are o's two rules for ip, as iptables-save prints them.
func fwdOwnSpecs(o netfilter.Owner, ip net.IP) []string {
	c := iptables.SaveQuote(netfilter.IptablesMarkerComment(o))
	return []string{
		"-d " + hostPrefix(ip) + " -m conntrack --ctstate RELATED,ESTABLISHED -m comment --comment " + c + " -j ACCEPT",
		"-s " + hostPrefix(ip) + " -m comment --comment " + c + " -j ACCEPT",
	}
}

// fwdUpstreamSpecs are upstream's two uncommented rules for ip.
func fwdUpstreamSpecs(ip net.IP) []string {
	return []string{
		"-d " + hostPrefix(ip) + " -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
		"-s " + hostPrefix(ip) + " -j ACCEPT",
	}
}

func isoStage1Specs(p IngressPolicy, br string) []string {
	var out []string
	if p == IngressIsolated {
		out = append(out, fmt.Sprintf("-i %s -o %s -j DROP", br, br))
	}
	return append(out, fmt.Sprintf("-i %s ! -o %s -j %s", br, br, isoStage2))
}

func isoStage2Spec(br string) string { return fmt.Sprintf("-o %s -j DROP", br) }

// fwdOwnerRE reads the owner back from a rule's marker comment as
// iptables-save prints it.
var fwdOwnerRE = iptables.NewLazyRE(`--comment "name: \\"([^"\\]*)\\" id: \\"([^"\\]*)\\" if: ([0-9a-f]*)"`)

func fwdOwnerOf(spec string) (netfilter.Owner, bool) {
	m := fwdOwnerRE.FindStringSubmatch(spec)
	if m == nil {
		return netfilter.Owner{}, false
	}
	var ifName []byte
	if _, err := fmt.Sscanf(m[3], "%x", &ifName); err != nil && m[3] != "" {
		return netfilter.Owner{}, false
	}
	return netfilter.Owner{Network: m[1], ContainerID: m[2], IfName: string(ifName)}, true
}

func (m *iptablesForward) usable() error {
	for _, f := range nftnl.Families {
		if err := m.ipt.Usable(f); err != nil {
			return err
		}
	}
	return nil
}

func (m *iptablesForward) save(f nftnl.Family) (iptables.NatTable, error) {
	out, err := m.ipt.Exec(m.ipt.Tool(f, "save"), []string{"-t", "filter"}, nil)
	if err != nil {
		return iptables.NatTable{}, err
	}
	return iptables.ParseTable(out, "filter")
}

func (m *iptablesForward) restore(f nftnl.Family, lines []string) error {
	if len(lines) == 0 {
		return nil
	}
	_, err := m.ipt.Exec(m.ipt.Tool(f, "restore"), iptables.RestoreArgs, iptables.TablePayload("filter", lines))
	return err
}

// byFamilyIP splits ips by family.
func byFamilyIP(ips []net.IP) map[nftnl.Family][]net.IP {
	out := map[nftnl.Family][]net.IP{}
	for _, ip := range ips {
		if ip != nil {
			out[nftnl.FamilyOf(ip)] = append(out[nftnl.FamilyOf(ip)], ip)
		}
	}
	return out
}

// change runs fn on each family's table under the CNI-FORWARD lock and
// applies the lines it returns.
func (m *iptablesForward) change(what string, fams []nftnl.Family, fn func(f nftnl.Family, t iptables.NatTable) ([]string, error)) error {
	if err := m.usable(); err != nil {
		return err
	}
	unlock, err := m.ipt.LockChains(fwdLockName)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer unlock()
	var errs []error
	for _, f := range fams {
		t, err := m.save(f)
		if err == nil {
			var lines []string
			if lines, err = fn(f, t); err == nil {
				err = m.restore(f, lines)
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s (%s filter table): %w", what, f, err))
		}
	}
	return errors.Join(errs...)
}

func (m *iptablesForward) Setup(r ForwardRules) error {
	_, err := m.SetupUndoable(r)
	return err
}

func (m *iptablesForward) SetupUndoable(r ForwardRules) (undo func() error, err error) {
	if err := netfilter.CheckIPTablesComment(r.Owner); err != nil {
		return nil, err
	}
	ips := byFamilyIP(r.Addrs)
	var fams []nftnl.Family
	for _, f := range nftnl.Families {
		if len(ips[f]) > 0 {
			fams = append(fams, f)
		}
	}
	// prior holds, per family, o's rules in CNI-FORWARD at the first read
	// of that family, before this call changed it: the undo goes back to
	// them. A family not read was not changed.
	prior := map[nftnl.Family][]string{}
	if m.appendUnlocked(r, ips, fams, prior) {
		return func() error { return m.restoreOwn(r.Owner, prior) }, nil
	}
	err = m.change("set up forward rules for "+r.Owner.String(), fams, func(f nftnl.Family, t iptables.NatTable) ([]string, error) {
		if _, read := prior[f]; !read {
			prior[f] = ownSpecs(t, r.Owner)
		}
		if m.failFamily != nil {
			if err := m.failFamily(f); err != nil {
				return nil, err
			}
		}
		return r.setupLines(t, ips[f]), nil
	})
	if err != nil {
		// Each restore is one transaction, so only the families done
		// before the failure changed: back to what they held.
		if uerr := m.restoreOwn(r.Owner, prior); uerr != nil {
			err = errors.Join(err, fmt.Errorf("undo: %w", uerr))
		}
		return nil, err
	}
	return func() error { return m.restoreOwn(r.Owner, prior) }, nil
}

// appendUnlocked is Setup's usual case without the CNI-FORWARD lock: when
// each family's table already has the shared chains and jumps in place,
// all r needs is its own rules appended to CNI-FORWARD, and appends of
// different attachments do not conflict (each restore is one transaction;
// iptables-nft retries one that raced another commit, and legacy iptables
// serialises them with -w). Under the lock, every firewall ADD of a node
// waited for the others' iptables-save and iptables-restore in turn. It
// reports whether that was all; on false (anything else to change, a
// failure) Setup goes the locked way, which reads again: a family done
// here then needs no line there. It records in prior what o held in each
// family it read.
func (m *iptablesForward) appendUnlocked(r ForwardRules, ips map[nftnl.Family][]net.IP, fams []nftnl.Family, prior map[nftnl.Family][]string) bool {
	if err := m.usable(); err != nil {
		return false
	}
	appendOwn := "-A " + fwdChain + " "
	for _, f := range fams {
		if m.failFamily != nil && m.failFamily(f) != nil {
			return false // the locked way meets the failure
		}
		if m.appendNFT(r, f, ips[f]) {
			prior[f] = []string{} // appendNFT appends only where o has no rule
			continue
		}
		t, err := m.save(f)
		if err != nil {
			return false
		}
		prior[f] = ownSpecs(t, r.Owner)
		lines := r.setupLines(t, ips[f])
		for _, l := range lines {
			if !strings.HasPrefix(l, appendOwn) {
				return false
			}
		}
		if m.restore(f, lines) != nil {
			return false
		}
	}
	return true
}

// setupLines are the restore lines that make t hold r for ips.
func (r ForwardRules) setupLines(t iptables.NatTable, ips []net.IP) []string {
	var lines []string
	admin := r.admin()
	for _, ch := range []string{fwdChain, admin} {
		if !t.Chains[ch] {
			lines = append(lines, "-N "+ch)
		}
	}
	if r.Policy == IngressSameBridge || r.Policy == IngressIsolated {
		for _, ch := range []string{isoStage1, isoStage2} {
			if !t.Chains[ch] {
				lines = append(lines, "-N "+ch)
			}
		}
		for _, spec := range []string{isoStage2Spec(r.Bridge)} {
			if !slices.Contains(t.Rules[isoStage2], spec) {
				lines = append(lines, "-I "+isoStage2+" 1 "+spec)
			}
		}
		for _, spec := range slices.Backward(isoStage1Specs(r.Policy, r.Bridge)) {
			if !slices.Contains(t.Rules[isoStage1], spec) {
				lines = append(lines, "-I "+isoStage1+" 1 "+spec)
			}
		}
		for _, ch := range []string{isoStage1, isoStage2} {
			if rs := t.Rules[ch]; len(rs) == 0 || rs[len(rs)-1] != "-j RETURN" {
				lines = append(lines, "-A "+ch+" -j RETURN")
			}
		}
	}
	if !slices.Contains(t.Rules["FORWARD"], fwdJumpSpec) {
		lines = append(lines, "-I FORWARD 1 "+fwdJumpSpec)
	}
	if r.Policy == IngressSameBridge || r.Policy == IngressIsolated {
		// Inserted after the CNI-FORWARD jump, so it lands in front of it.
		if !slices.Contains(t.Rules["FORWARD"], isoJumpSpec(r.Policy)) {
			lines = append(lines, "-I FORWARD 1 "+isoJumpSpec(r.Policy))
		}
	}
	if rs := t.Rules[fwdChain]; len(rs) == 0 || rs[0] != fwdAdminSpec(admin) {
		if slices.Contains(rs, fwdAdminSpec(admin)) {
			lines = append(lines, "-D "+fwdChain+" "+fwdAdminSpec(admin))
		}
		lines = append(lines, "-I "+fwdChain+" 1 "+fwdAdminSpec(admin))
	}
	var want []string
	for _, ip := range ips {
		want = append(want, fwdOwnSpecs(r.Owner, ip)...)
	}
	for _, spec := range t.Rules[fwdChain] {
		if o, ok := fwdOwnerOf(spec); ok && o == r.Owner && !slices.Contains(want, spec) {
			lines = append(lines, "-D "+fwdChain+" "+spec)
		}
	}
	for _, spec := range want {
		if !slices.Contains(t.Rules[fwdChain], spec) {
			lines = append(lines, "-A "+fwdChain+" "+spec)
		}
	}
	return lines
}

// mayHold lists the families whose filter table may hold CNI-FORWARD:
// with iptables-nft, a netlink listing proves its absence without a
// process (a DEL on the nftables backend sweeps iptables too).
func (m *iptablesForward) mayHold() []nftnl.Family {
	var out []nftnl.Family
	for _, f := range nftnl.Families {
		if !m.ipt.TableChainSurelyAbsent(f, "filter", fwdChain) {
			out = append(out, f)
		}
	}
	return out
}

func (m *iptablesForward) Teardown(o netfilter.Owner, addrs []net.IP) error {
	ips := byFamilyIP(addrs)
	fams, err := m.teardownNFTAll(o, ips, m.mayHold())
	if err != nil || len(fams) == 0 {
		return err
	}
	return m.change("tear down forward rules for "+o.String(), fams, func(f nftnl.Family, t iptables.NatTable) ([]string, error) {
		if !t.Chains[fwdChain] {
			return nil, nil
		}
		var upstream []string
		for _, ip := range ips[f] {
			upstream = append(upstream, fwdUpstreamSpecs(ip)...)
		}
		var lines []string
		for _, spec := range t.Rules[fwdChain] {
			if own, ok := fwdOwnerOf(spec); (ok && own == o) || slices.Contains(upstream, spec) {
				lines = append(lines, "-D "+fwdChain+" "+spec)
			}
		}
		return lines, nil
	})
}

// teardownNFTAll runs teardownNFT for each of fams under the CNI-FORWARD
// lock, and returns the families it did not settle.
func (m *iptablesForward) teardownNFTAll(o netfilter.Owner, ips map[nftnl.Family][]net.IP, fams []nftnl.Family) ([]nftnl.Family, error) {
	if len(fams) == 0 || m.ipt.NoNFT {
		return fams, nil
	}
	unlock, err := m.ipt.LockChains(fwdLockName)
	if err != nil {
		return nil, fmt.Errorf("tear down forward rules for %s: %w", o, err)
	}
	defer unlock()
	var rest []nftnl.Family
	for _, f := range fams {
		if !m.teardownNFT(o, f, ips[f]) {
			rest = append(rest, f)
		}
	}
	return rest, nil
}

func (m *iptablesForward) Check(r ForwardRules) error {
	if err := m.usable(); err != nil {
		return err
	}
	ips := byFamilyIP(r.Addrs)
	var miss []error
	for _, f := range nftnl.Families {
		if len(ips[f]) == 0 || m.checkNFT(r, f, ips[f]) {
			continue
		}
		t, err := m.save(f)
		if err != nil {
			return fmt.Errorf("check forward rules of %s: %w", r.Owner, err)
		}
		for _, l := range r.missing(t, ips[f]) {
			miss = append(miss, fmt.Errorf("%w: %s filter table: %s", netfilter.ErrMissing, f, l))
		}
	}
	if len(miss) > 0 {
		return fmt.Errorf("forward rules of %s: %w", r.Owner, errors.Join(miss...))
	}
	return nil
}

// missing lists what Check finds absent, as "-A <chain> <spec>" lines.
// Upstream's uncommented per-address rules count as present.
func (r ForwardRules) missing(t iptables.NatTable, ips []net.IP) []string {
	var out []string
	need := func(chain, spec string) {
		if !slices.Contains(t.Rules[chain], spec) {
			out = append(out, "-A "+chain+" "+spec)
		}
	}
	need("FORWARD", fwdJumpSpec)
	if rs := t.Rules[fwdChain]; len(rs) == 0 || rs[0] != fwdAdminSpec(r.admin()) {
		out = append(out, "-A "+fwdChain+" "+fwdAdminSpec(r.admin())+" (first)")
	}
	for _, ip := range ips {
		own, up := fwdOwnSpecs(r.Owner, ip), fwdUpstreamSpecs(ip)
		for i := range own {
			if !slices.Contains(t.Rules[fwdChain], own[i]) && !slices.Contains(t.Rules[fwdChain], up[i]) {
				out = append(out, "-A "+fwdChain+" "+own[i])
			}
		}
	}
	if r.Policy == IngressSameBridge || r.Policy == IngressIsolated {
		fw := t.Rules["FORWARD"]
		if i, j := slices.Index(fw, isoJumpSpec(r.Policy)), slices.Index(fw, fwdJumpSpec); i < 0 || (j >= 0 && i > j) {
			out = append(out, "-A FORWARD "+isoJumpSpec(r.Policy)+" (before the "+fwdChain+" jump)")
		}
		for _, spec := range isoStage1Specs(r.Policy, r.Bridge) {
			need(isoStage1, spec)
		}
		need(isoStage2, isoStage2Spec(r.Bridge))
	}
	return out
}

func (m *iptablesForward) GC(network string, keep []netfilter.Owner) error {
	fams := m.mayHold()
	if len(fams) == 0 {
		return nil
	}
	return m.change("collect forward rules of network "+fmt.Sprintf("%q", network), fams, func(f nftnl.Family, t iptables.NatTable) ([]string, error) {
		var lines []string
		for _, spec := range t.Rules[fwdChain] {
			o, ok := fwdOwnerOf(spec)
			if ok && o.Network == network && !slices.Contains(keep, o) {
				lines = append(lines, "-D "+fwdChain+" "+spec)
			}
		}
		return lines, nil
	})
}

// fwdRender is the restore input Setup applies on an empty filter table,
// for tests.
func fwdRender(r ForwardRules, f nftnl.Family) string {
	return strings.TrimSpace(string(iptables.TablePayload("filter", r.setupLines(iptables.NatTable{Chains: map[string]bool{}, Rules: map[string][]string{}}, byFamilyIP(r.Addrs)[f]))))
}
