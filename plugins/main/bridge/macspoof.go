package bridge

import (
	"net"

	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/netfilter/macspoof"
	"github.com/cniforge/plugins/pkg/rollback"
)

// setupMacSpoofCheck drops frames from the container's port whose source
// MAC is not the container interface's. The rules live in the host
// namespace, the plugin thread's.
func (a *attachment) setupMacSpoofCheck(hostVeth netlink.Link, mac net.HardwareAddr, undo *rollback.Stack) error {
	owner := a.Owner()
	sc := macspoof.MacSpoofCheck{Owner: owner, Port: hostVeth.Attrs().Name, MAC: mac}
	if err := sc.Setup(); err != nil {
		return err
	}
	undo.Push("remove mac spoof check", func() error { return macspoof.TeardownMacSpoofCheck(owner) })
	return nil
}
