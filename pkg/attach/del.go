package attach

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
)

func (r *runner[C]) del(a *Attachment, c C) error {
	if err := a.guardDel(); err != nil {
		return err
	}
	releaseFirst := a.delegates() && releasesOnInterface(a.Conf.IPAM.Type)
	ctx := context.TODO()
	if a.delegates() && !releaseFirst {
		// Its start overlaps the teardown (a link deletion waits for an
		// RCU grace period); it releases only when handed its config.
		var cancel func()
		ctx, cancel, _ = a.ipam.Prestart(ctx, a.Conf.IPAM.Type, "DEL")
		defer cancel()
	}
	var errs []error
	if releaseFirst {
		errs = append(errs, releaseIPAM(ctx, a)...)
	}
	// Whatever ipMasq says now, and on both backends: the ADD may have run
	// with another ipMasq or ipMasqBackend, or be the other suite's. It
	// needs no addresses and no container namespace, and shares nothing
	// with the plugin's own steps, so it runs beside them: their link
	// deletion waits out an RCU grace period, its iptables a process.
	var masqDone <-chan []error
	if _, ok := any(c).(masqer); ok && r.p.Masq != nil {
		masqDone = a.Beside(func() error {
			if err := r.p.Masq.TeardownAll(a.Owner()); err != nil {
				return fmt.Errorf("masquerade: %w", err)
			}
			return nil
		})
	}
	if r.p.Del != nil {
		errs = append(errs, safeSteps(a.Log, func() []error { return r.p.Del(a, c) })...)
	}
	if masqDone != nil {
		errs = append(errs, <-masqDone...)
	}
	// Otherwise last, as ADD reserved first: a released address must not
	// meet what is left of this attachment.
	if a.delegates() && !releaseFirst {
		errs = append(errs, releaseIPAM(ctx, a)...)
	}
	return errors.Join(errs...)
}

// Beside runs fn in the plugin's host namespace on a thread of its own,
// beside the caller, and delivers its error (or its panic, as an error)
// on the returned channel once it is done; the caller receives from it
// before returning. The namespace is entered explicitly: a new thread is
// in the process's namespace, which is not the plugin's host namespace
// when the frame runs inside a test's. For independent DEL steps, so that
// one's kernel wait (a link deletion's RCU grace period) hides the other.
func (a *Attachment) Beside(fn func() error) <-chan []error {
	done := make(chan []error, 1)
	hostNS, _, err := a.Host()
	if err != nil {
		done <- []error{err}
		close(done)
		return done
	}
	go func() {
		// Recovered inside Do, so that the thread leaves the namespace
		// it entered before the error is delivered.
		err := hostNS.Do(func() (err error) {
			defer recovered(&err, a.Log)
			return fn()
		})
		if err != nil {
			done <- []error{err}
		}
		close(done)
	}()
	return done
}

func releaseIPAM(ctx context.Context, a *Attachment) []error {
	if err := findIPAM(a, a.Args.Path); err != nil {
		return []error{err} // code 7, naming the type: nothing to release with
	}
	if err := a.ipam.Del(ctx, a.Conf.IPAM.Type, a.Conf.Raw); err != nil {
		return []error{fmt.Errorf("ipam %s DEL: %w", a.Conf.IPAM.Type, err)}
	}
	return nil
}

// releasesOnInterface says whether an IPAM type releases its address by
// talking on the container interface, so DEL must run it while that
// interface still exists (as upstream, which releases IPAM first for every
// type): the dhcp daemon sends its RELEASE from the container interface,
// inside the container namespace, and sends none once the interface is
// gone (the server would keep the lease until it expires).
func releasesOnInterface(ipamType string) bool { return ipamType == "dhcp" }

// safeSteps runs fn, turning a panic into one error so that the steps
// after it (IPAM release) still run.
func safeSteps(log *slog.Logger, fn func() []error) (errs []error) {
	defer func() {
		if v := recover(); v != nil {
			errs = append(errs, panicError(v, log))
		}
	}()
	return fn()
}
