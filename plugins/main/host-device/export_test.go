package hostdevice

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
