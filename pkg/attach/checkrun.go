package attach

import (
	"context"
	"errors"
	"fmt"

	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/cniforge/plugins/pkg/result"
)

func (r *runner[C]) check(a *Attachment, c C) error {
	prev, err := a.Conf.Prev()
	if err != nil {
		return err
	}
	if prev == nil && !r.p.PrevOptional {
		return result.InvalidConfig(errors.New("prevResult: missing (CHECK compares the kernel with the result of ADD)"))
	}
	if err := findIPAM(a, a.Args.Path); err != nil {
		return err
	}
	if !a.delegates() {
		return r.checkOwn(a, c, prev)
	}
	checkIPAM := func(ctx context.Context) error {
		if err := a.ipam.Check(ctx, a.Conf.IPAM.Type, a.Conf.Raw); err != nil {
			return fmt.Errorf("ipam %s CHECK: %w", a.Conf.IPAM.Type, err)
		}
		return nil
	}
	ctx, cancel, started := a.ipam.Prestart(context.TODO(), a.Conf.IPAM.Type, "CHECK")
	defer cancel()
	if !started {
		if err := checkIPAM(ctx); err != nil {
			return err
		}
		return r.checkOwn(a, c, prev)
	}
	// Both only read, so the delegate's CHECK (its own process) runs
	// while the plugin compares the kernel; its error still comes first.
	ipamErr := make(chan error, 1)
	go func() {
		var err error
		defer func() { ipamErr <- err }()
		defer recovered(&err, a.Log) // a goroutine's panic passes every other recover
		err = checkIPAM(ctx)
	}()
	ownErr := r.checkOwn(a, c, prev)
	if err := <-ipamErr; err != nil {
		return err
	}
	return ownErr
}

// checkOwn is CHECK's part in the container namespace: the plugin's Check.
func (r *runner[C]) checkOwn(a *Attachment, c C, prev *current.Result) error {
	if _, _, err := a.Container(); err != nil {
		return err
	}
	if r.p.Chained {
		if err := chainedIface(a, prev); err != nil {
			return err
		}
	}
	if r.p.Check == nil {
		return nil
	}
	return r.p.Check(a, c, prev)
}
