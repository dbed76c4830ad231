package tap

import (
	"errors"
	"fmt"
	"os"

	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ns"
)

// del deletes the tap; the frame releases IPAM after it.
func del(a *attach.Attachment, c *config) []error {
	return []error{deleteTap(a.Args.Netns, a.Args.IfName, a.Alias())}
}

// deleteTap deletes ifName in the namespace at nsPath when it is a tuntap
// tagged with alias, or untagged (an upstream ADD tags nothing). A
// namespace that is gone (empty path, missing, no longer a namespace) took
// its tap with it; a missing link and a link that is not ours are nothing
// to delete.
func deleteTap(nsPath, ifName, alias string) error {
	if nsPath == "" {
		return nil
	}
	contNS, err := ns.Open(nsPath)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, ns.ErrNotNetNS) {
		return nil
	}
	if err != nil {
		return err
	}
	defer contNS.Close()
	h, err := contNS.Handle()
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := ip.LinkByName(h, ifName)
	if errors.Is(err, ip.ErrLinkNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("in %s: %w", nsPath, err)
	}
	if _, ok := l.(*netlink.Tuntap); !ok {
		return nil // another plugin's interface of that name
	}
	if a := l.Attrs().Alias; a != "" && a != alias {
		return nil // another attachment's tap
	}
	if err := ip.DelLinkByName(h, ifName); err != nil {
		return fmt.Errorf("in %s: %w", nsPath, err)
	}
	return nil
}
