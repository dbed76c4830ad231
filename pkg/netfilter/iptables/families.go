package iptables

import (
	"errors"
	"fmt"

	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// Snapshots is what an owner's chain held in each family before a
// SetupUndoable changed it, in the order the families were changed: what
// its undo goes back to.
type Snapshots struct {
	Fams  []nftnl.Family
	Prior map[nftnl.Family]ChainSnapshot
}

// FamilyStep is one rule set's way to change, or to take back, one family
// (the caller holds the chains' locks).
type FamilyStep struct {
	// Fail, when set, is asked before each family's change whether it
	// shall fail (tests: a later family's failure after an earlier one
	// went through).
	Fail func(f nftnl.Family) error
	// Setup changes f and returns what its chain held before.
	Setup func(f nftnl.Family) (ChainSnapshot, error)
	// Restore takes f back to what it held before (w); where there was
	// no chain, it removes only the owner's rules.
	Restore func(f nftnl.Family, w ChainSnapshot) error
}

// SetupFamilies runs s.Setup for each of fams in turn, each family its own
// transaction. It leaves no family half set up, and a live attachment as
// it was (check --repair runs Setup over one): when one family fails, each
// done so far goes back to what its chain held before, and the failures of
// that undo join the error.
func (s FamilyStep) SetupFamilies(fams []nftnl.Family) (Snapshots, error) {
	done := Snapshots{Prior: map[nftnl.Family]ChainSnapshot{}}
	for _, f := range fams {
		var was ChainSnapshot
		var err error
		if s.Fail != nil {
			err = s.Fail(f)
		}
		if err == nil {
			was, err = s.Setup(f)
		}
		if err != nil {
			for _, df := range done.Fams {
				if uerr := s.Restore(df, done.Prior[df]); uerr != nil {
					err = errors.Join(err, fmt.Errorf("undo %s: %w", df, uerr))
				}
			}
			return Snapshots{}, err
		}
		done.Prior[f] = was
		done.Fams = append(done.Fams, f)
	}
	return done, nil
}

// RestoreFamilies takes the families of done back to what they held, under
// the locks of chains (the undo of a SetupUndoable). what names the rules
// in errors: "masquerade of <owner>".
func (m *Runner) RestoreFamilies(chains []string, what string, done Snapshots, restore func(f nftnl.Family, w ChainSnapshot) error) error {
	unlock, err := m.LockChains(chains...)
	if err != nil {
		return fmt.Errorf("restore %s: %w", what, err)
	}
	defer unlock()
	var errs []error
	for _, f := range done.Fams {
		if err := restore(f, done.Prior[f]); err != nil {
			errs = append(errs, fmt.Errorf("restore %s %s: %w", f, what, err))
		}
	}
	return errors.Join(errs...)
}
