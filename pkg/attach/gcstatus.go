package attach

import (
	"context"
	"errors"
	"fmt"

	"github.com/cniforge/plugins/pkg/owner"
	"github.com/cniforge/plugins/pkg/result"
)

func (r *runner[C]) gc(a *Attachment, c C) error {
	valid, err := result.GCAttachments(a.Args.StdinData)
	if err != nil {
		return err
	}
	var errs []error
	if a.delegates() {
		if err := a.ipam.GC(context.TODO(), a.Conf.IPAM.Type, a.Conf.Raw); err != nil {
			errs = append(errs, fmt.Errorf("ipam %s GC: %w", a.Conf.IPAM.Type, err))
		}
	}
	keep := owner.Owners(a.Conf.Name, valid)
	if _, ok := any(c).(masqer); ok && r.p.Masq != nil {
		if err := r.p.Masq.GCAll(a.Conf.Name, keep); err != nil {
			errs = append(errs, fmt.Errorf("masquerade GC: %w", err))
		}
	}
	if r.p.GC != nil {
		errs = append(errs, safeSteps(a.Log, func() []error { return r.p.GC(a, c, keep) })...)
	}
	return errors.Join(errs...)
}

func (r *runner[C]) status(a *Attachment, c C) error {
	// The chosen masquerade backend must work here, or every ADD would
	// fail: code 50 (plugin not available).
	if m, ok := any(c).(masqer); ok && m.MasqConf().IPMasq && r.p.Masq != nil {
		if err := r.p.Masq.Usable(m.MasqConf().Backend()); err != nil {
			return result.Unavailable(fmt.Errorf("ipMasqBackend %q: %w", m.MasqConf().Backend(), err))
		}
	}
	if r.p.Status != nil {
		if err := r.p.Status(a, c); err != nil {
			return err
		}
	}
	if !a.delegates() {
		return nil
	}
	if err := a.ipam.Status(context.TODO(), a.Conf.IPAM.Type, a.Conf.Raw); err != nil {
		return fmt.Errorf("ipam %s STATUS: %w", a.Conf.IPAM.Type, err)
	}
	return nil
}
