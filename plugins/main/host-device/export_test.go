package hostdevice

import (
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/rollback"
)

// ParseConfig exposes parseConfig to the config tests.
var ParseConfig = parseConfig

// Selector is the key and value that pick the device.
func (c *config) Selector() (string, string) { return c.sel.key, c.sel.value }

// ReadSysfs resolves the selector of stdin through the sysfs tree at root:
// the netdev names, or the userspace driver.
func ReadSysfs(root string, stdin []byte) ([]string, string, error) {
	c, err := parseConfig(stdin)
	if err != nil {
		return nil, "", err
	}
	d, err := readSysfs(root, c.sel)
	return d.names, d.userspaceDriver, err
}

// MoveIn runs moveIn as ADD's frame would: on an error its undo stack runs.
func MoveIn(hostNS *ns.NetNS, hostH *netlink.Handle, contNS *ns.NetNS, contH *netlink.Handle, dev netlink.Link, ifName string) error {
	var undo rollback.Stack
	_, err := moveIn(hostNS, hostH, contNS, contH, dev, ifName, tempName("test", ifName), &undo)
	if err != nil {
		undo.Run(nil)
	}
	return err
}

// TempName is the temporary name of the attachment's device.
var TempName = tempName
