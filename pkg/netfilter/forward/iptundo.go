package forward

import (
	"slices"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// The iptables backend's undo: what an ADD over a live attachment puts
// back when it fails (SetupUndoable, in iptables.go, records prior).

// ownSpecs are o's rules in t's CNI-FORWARD.
func ownSpecs(t iptables.NatTable, o netfilter.Owner) []string {
	out := []string{}
	for _, spec := range t.Rules[fwdChain] {
		if own, ok := fwdOwnerOf(spec); ok && own == o {
			out = append(out, spec)
		}
	}
	return out
}

// restoreOwn takes o's rules in CNI-FORWARD back to prior (family ->
// specs): rules this ADD added go, those it removed come back, the others
// stay as they are. With nothing before it is a teardown of o in the
// families read (netlink's short way on iptables-nft). The shared chains and jumps stay, as after
// any teardown; upstream's uncommented rules are not Setup's to change.
func (m *iptablesForward) restoreOwn(o netfilter.Owner, prior map[nftnl.Family][]string) error {
	var fams []nftnl.Family
	live := false
	for _, f := range nftnl.Families {
		if was, read := prior[f]; read {
			fams = append(fams, f)
			live = live || len(was) > 0
		}
	}
	if len(fams) == 0 {
		return nil
	}
	if !live {
		rest, err := m.teardownNFTAll(o, nil, fams)
		if err != nil || len(rest) == 0 {
			return err
		}
		fams = rest
	}
	return m.change("restore forward rules of "+o.String(), fams, func(f nftnl.Family, t iptables.NatTable) ([]string, error) {
		var lines []string
		have := ownSpecs(t, o)
		for _, spec := range have {
			if !slices.Contains(prior[f], spec) {
				lines = append(lines, "-D "+fwdChain+" "+spec)
			}
		}
		for _, spec := range prior[f] {
			if !slices.Contains(have, spec) {
				lines = append(lines, "-A "+fwdChain+" "+spec)
			}
		}
		return lines, nil
	})
}
