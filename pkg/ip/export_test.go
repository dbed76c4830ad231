package ip

import (
	"errors"

	"github.com/vishvananda/netlink"
)

// WithFailingLookup returns o with the lookup of the new host end failing,
// as a transient netlink error would.
func WithFailingLookup(o VethOptions) VethOptions {
	o.lookup = func(*netlink.Handle, string) (netlink.Link, error) {
		return nil, errors.New("injected lookup failure")
	}
	return o
}
