// Package result holds what every plugin does with CNI results and errors:
// parsing and converting prevResult, printing a result in the requested
// version, comparing expected state for CHECK, and building CNI errors with
// the right code. It never touches the kernel.
package result

import (
	"errors"

	"github.com/containernetworking/cni/pkg/types"
)

// CNI error codes this suite returns beyond those types defines.
const (
	// CodeUnavailable is STATUS's "cannot service ADD requests".
	CodeUnavailable uint = 50
	// CodeUnavailableLimited is STATUS's "cannot service ADD, and existing
	// attachments may have limited connectivity".
	CodeUnavailableLimited uint = 51
)

func coded(code uint, err error) error {
	if err == nil {
		return nil
	}
	var e *types.Error
	if errors.As(err, &e) {
		return err // already carries a code; keep the more specific one
	}
	return types.NewError(code, err.Error(), "")
}

// InvalidConfig marks err as CNI code 7 (invalid network config).
func InvalidConfig(err error) error { return coded(types.ErrInvalidNetworkConfig, err) }

// Decoding marks err as CNI code 6 (failed to decode content).
func Decoding(err error) error { return coded(types.ErrDecodingFailure, err) }

// InvalidNetNS marks err as CNI code 8 (invalid network namespace).
func InvalidNetNS(err error) error { return coded(types.ErrInvalidNetNS, err) }

// InvalidEnv marks err as CNI code 4 (invalid environment variables).
func InvalidEnv(err error) error { return coded(types.ErrInvalidEnvironmentVariables, err) }

// IOFailure marks err as CNI code 5 (I/O failure).
func IOFailure(err error) error { return coded(types.ErrIOFailure, err) }

// TryAgainLater marks err as CNI code 11 (transient; retry later).
func TryAgainLater(err error) error { return coded(types.ErrTryAgainLater, err) }

// Unavailable marks err as STATUS code 50 (plugin cannot service ADD).
func Unavailable(err error) error { return coded(CodeUnavailable, err) }

// Code returns the CNI code carried by err, or types.ErrInternal (999) when
// err carries none.
func Code(err error) uint {
	var e *types.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return types.ErrInternal
}

// Flatten returns err as one CNI error carrying err's whole message and the
// code of the first CNI error wrapped inside it (999 when there is none, or
// when that code is 0).
//
// skel reports the innermost *types.Error it finds in a command's error, so
// without this, context wrapped around a coded error ("ipam host-local ADD:
// ...") and the other failures joined beside it in a DEL would not reach
// the runtime. pkg/plugin applies it to every command.
func Flatten(err error) error {
	if err == nil {
		return nil
	}
	var e *types.Error
	if !errors.As(err, &e) {
		return err
	}
	// A code of 0 is no CNI error (a delegate that exited non-zero with
	// only stderr yields one from invoke): the runtime gets 999, with the
	// delegate's stderr in the message.
	code := e.Code
	if code == 0 {
		code = types.ErrInternal
	}
	if te, ok := err.(*types.Error); ok {
		if te.Code != 0 {
			return te
		}
		return &types.Error{Code: code, Msg: te.Msg, Details: te.Details}
	}
	return &types.Error{Code: code, Msg: err.Error()}
}
