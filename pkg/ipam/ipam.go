// Package ipam delegates address management to the IPAM plugin named in a
// network config (ADD, DEL, CHECK, GC, STATUS) and applies an IPAM result to
// an interface. The delegate is found on CNI_PATH, as the spec requires.
//
// In the multicall binary (cmd/cniforge), a delegate whose binary on
// CNI_PATH is that same executable runs in this process instead of a second
// exec, with the stdin, environment, result and errors the exec would have
// had (plugin.Plugin.RunInProcess); any other binary is exec'd.
package ipam

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/invoke"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/cniforge/plugins/pkg/result"
)

// ValidateType refuses an IPAM type that is empty or could name a binary
// outside CNI_PATH (result.ValidateIPAMType, the check the frame's config
// decoding makes).
func ValidateType(t string) error { return result.ValidateIPAMType(t) }

// Find refuses, before any change, an IPAM type that is not in cniPath (a
// CNI_PATH value): a config problem (code 7), not an internal error.
func Find(ipamType, cniPath string) error {
	if _, err := invoke.FindInPath(ipamType, filepath.SplitList(cniPath)); err != nil {
		return result.InvalidConfig(fmt.Errorf("ipam.type: %q not found in CNI_PATH %q", ipamType, cniPath))
	}
	return nil
}

// Add runs the IPAM plugin's ADD with the plugin's own stdin config and
// returns its result as a current result.
func Add(ctx context.Context, ipamType string, netconf []byte) (*current.Result, error) {
	if err := ValidateType(ipamType); err != nil {
		return nil, result.InvalidConfig(err)
	}
	r, err := invoke.DelegateAdd(ctx, ipamType, netconf, delegateExec)
	if err != nil {
		return nil, fmt.Errorf("ipam %s ADD: %w", ipamType, err)
	}
	return result.Current(r)
}

// Del runs the IPAM plugin's DEL.
func Del(ctx context.Context, ipamType string, netconf []byte) error {
	return delegate(ctx, "DEL", ipamType, netconf, invoke.DelegateDel)
}

// Check runs the IPAM plugin's CHECK.
func Check(ctx context.Context, ipamType string, netconf []byte) error {
	return delegate(ctx, "CHECK", ipamType, netconf, invoke.DelegateCheck)
}

// GC runs the IPAM plugin's GC.
func GC(ctx context.Context, ipamType string, netconf []byte) error {
	return delegate(ctx, "GC", ipamType, netconf, invoke.DelegateGC)
}

// Status runs the IPAM plugin's STATUS.
func Status(ctx context.Context, ipamType string, netconf []byte) error {
	return delegate(ctx, "STATUS", ipamType, netconf, invoke.DelegateStatus)
}

type delegateFunc func(context.Context, string, []byte, invoke.Exec) error

func delegate(ctx context.Context, verb, ipamType string, netconf []byte, fn delegateFunc) error {
	if err := ValidateType(ipamType); err != nil {
		return result.InvalidConfig(err)
	}
	if err := fn(ctx, ipamType, netconf, delegateExec); err != nil {
		// The delegate's own CNI error (with its code) passes through intact.
		return err
	}
	return nil
}

// Frame is the delegation as the frame runs it (attach.IPAM): a plugin
// that takes its addresses from an IPAM plugin passes Frame{} in
// attach.Plugin.IPAM, so that only such plugins link the delegation.
type Frame struct{}

// Find is Find.
func (Frame) Find(ipamType, cniPath string) error { return Find(ipamType, cniPath) }

// Prestart starts verb's delegate early (Prestart) and returns ctx carrying
// it (WithPrestarted), its Cancel, and whether one was started.
func (Frame) Prestart(ctx context.Context, ipamType, verb string) (context.Context, func(), bool) {
	p := Prestart(ipamType, verb)
	if p == nil {
		return ctx, func() {}, false
	}
	return WithPrestarted(ctx, p), p.Cancel, true
}

// Add is Add.
func (Frame) Add(ctx context.Context, ipamType string, netconf []byte) (*current.Result, error) {
	return Add(ctx, ipamType, netconf)
}

// Del is Del.
func (Frame) Del(ctx context.Context, ipamType string, netconf []byte) error {
	return Del(ctx, ipamType, netconf)
}

// Check is Check.
func (Frame) Check(ctx context.Context, ipamType string, netconf []byte) error {
	return Check(ctx, ipamType, netconf)
}

// GC is GC.
func (Frame) GC(ctx context.Context, ipamType string, netconf []byte) error {
	return GC(ctx, ipamType, netconf)
}

// Status is Status.
func (Frame) Status(ctx context.Context, ipamType string, netconf []byte) error {
	return Status(ctx, ipamType, netconf)
}
