package hostdevice

import (
	"errors"
	"os"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ns"
)

// del moves the device back to the host under its original name; the frame
// releases IPAM after it. A namespace that is gone (empty path, missing,
// no longer a namespace) has nothing to return: the kernel gave a physical
// device back to the root namespace, or destroyed a virtual one.
func (p *hostDevice) del(a *attach.Attachment, c *config) []error {
	if a.Args.Netns == "" {
		return nil
	}
	contNS, err := ns.Open(a.Args.Netns)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, ns.ErrNotNetNS) {
		return nil
	}
	if err != nil {
		return []error{err}
	}
	defer contNS.Close()
	contH, err := contNS.Handle()
	if err != nil {
		return []error{err}
	}
	defer contH.Close()
	hostNS, hostH, err := a.Host()
	if err != nil {
		return []error{err}
	}
	return []error{moveOut(contNS, contH, hostNS, hostH, a.Args.IfName)}
}
