package ptp

import (
	"errors"

	"github.com/containernetworking/cni/pkg/types"
)

// coded returns err as a CNI error with its whole message. skel reports the
// innermost *types.Error it finds, which would drop the context wrapped
// around it ("ipam host-local ADD: ...", the other failures of a DEL).
func coded(err error) error {
	if err == nil {
		return nil
	}
	var e *types.Error
	if !errors.As(err, &e) {
		return err
	}
	if te, ok := err.(*types.Error); ok {
		return te
	}
	return &types.Error{Code: e.Code, Msg: err.Error()}
}
